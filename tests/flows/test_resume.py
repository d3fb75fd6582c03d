"""A refresh killed with SIGKILL at any point, started again, ends as if never interrupted.

Each case runs `python -m fleet_data.flows.cli refresh` in a child process and kills it with SIGKILL at
one point; the test then checks the database the dead process left (it opens, and holds whole
chunks only), resumes in this process, and compares the tables with those of a refresh of the
same fleet that was never interrupted. The points:

- during_ingest: the run is recorded, its roster not yet landed (failpoint `ingest`).
- submit_accepted_ledger_pending: the service accepted the recall batch, the ledger still says
  `pending:<key>` (failpoint `batch_submitted`): the resume replays the submit under the same
  idempotency key, which the service answers without billing again.
- after_batch_submit: as soon as the sandbox saw the submit (the ledger may or may not know it).
- mid_enrichment: after six market-value calls (chunks fetched, some landed, some in flight).
- mid_landing: inside a chunk's DuckDB transaction, every table written, COMMIT not reached
  (failpoint `landing`, the run's 8th landing): after WAL replay none of that chunk is there.
  The chunks fetching meanwhile finish their calls and wait for the database.
- after_landing: a chunk's landing committed, its answer journal not yet deleted (failpoint
  `landed`): the resume must not land it twice nor count its calls twice.
- retry_waiting: the service answers 30% of calls 503 with the spec's full `Retry-After: 60`
  (its own sandbox, faults drawn from a fixed seed); the run is killed once every other call is
  answered, while its retries wait out those 60 s. The service is well again for the resume, which
  asks once for exactly the calls that never got their answer: each VIN billed once per dataset.
- random: a seeded-random point, between two calls or inside a landing transaction. The seed
  changes every session, so the kill wanders over the phases; a failure names it, and
  FLEET_CRASH_SEED=<N> replays it. (The seed is not in the case's id: pytest-xdist's workers
  each import this file and must collect the same ids.)

The sandbox runs in its own process (it outlives the killed refreshes) and each case has its
own API key, so its billing and call journal are its own: they are the referee. Every answer a
killed run received was journalled in its staging folder as it arrived, before any landing, so the
resume lands it without calling again. What a kill may cost is the calls in flight at that instant
(the service answered and billed them, the process died before reading the answer): each was
journalled before it was sent, so it is in `api_calls` as `billing = 'unknown'` with what it may
have cost, and the ledger's sum is never below the service's bill. A process frozen at a failpoint
is killed only once its paid calls have stopped, so there nothing may be lost at all.

Beside them, without Prefect: a kill inside a 300,000-row landing, whose rows DuckDB has
already written into the database file before COMMIT; reopened, the file holds none of them.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import polars as pl
import pytest

from fleet_data.connectors.sandbox import FaultConfig, Sandbox
from fleet_data.flows.refresh import refresh_fleet
from fleet_data.tasks.settings import RefreshOptions
from fleet_data.tasks.ingest.fleet_files import read_fleet
from fleet_data.tasks.staging.journal import read_journal
from fleet_data.tasks.store.database import open_database

# The killed refreshes run side by side with the other xdist worker's tests: on a loaded 2-core box they
# took over 180 s, so the bound (a hang guard, not a timing) and the module's timeout leave room.
RUNS_BOUND = 480
pytestmark = [pytest.mark.usefixtures("prefect_server"), pytest.mark.timeout(RUNS_BOUND + 300)]
ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "data" / "sample_fleet.csv"
FLEET_SIZE = 24
RUN_OPTIONS = dict(lake=None, chunk_size=8, concurrency=2)
SEED = int(os.environ.get("FLEET_CRASH_SEED") or random.SystemRandom().randrange(1, 1_000_000))
REPLAY = f"random kill point of seed {SEED}: replay with FLEET_CRASH_SEED={SEED}"

# What must end identical, whatever the interruption: everything but run ids (and their place, run_seq), times and
# the service (each sandbox of the test answers on a port of its own).
COMPARE = {
    "vehicles": "SELECT vin, unit_number, plate, state, mileage FROM vehicles",
    "specs": "SELECT * EXCLUDE (run_id, run_seq, service, fetched_at) FROM specs",
    "market_values": "SELECT * EXCLUDE (run_id, run_seq, service, fetched_at) FROM market_values",
    "history_reports": "SELECT * EXCLUDE (run_id, run_seq, service, fetched_at) FROM history_reports",
    "lien_theft_events": "SELECT * EXCLUDE (run_id, run_seq, service, fetched_at) FROM lien_theft_events",
    "recalls": "SELECT * EXCLUDE (run_id, run_seq, service, fetched_at, first_seen_at, first_seen_run_id, last_seen_at) "
               "FROM recalls",
    "batch_checks": "SELECT vin, has_recalls, recall_count FROM recall_checks WHERE checked_via = 'batch'",
    "fetch_status": "SELECT vin, dataset, outcome FROM fetch_status",
    "failures": "SELECT vin, dataset FROM failures WHERE resolved_at IS NULL",
}
# The per-VIN datasets and the sandbox endpoint each one pays for.
PAID_PER_VIN = {"specs": "/specs", "market_value": "/v2/marketvalue", "history": "/history",
                "lien_theft": "/v1/lien-theft"}
SUBMIT = "/v1/recalls-batch/submit"
# Every endpoint that bills per call: the per-VIN datasets and the campaign details.
PAID = (*PAID_PER_VIN.values(), "/v1/recalls", "/v1/recalls-ymm")
# 30% of calls answer 503 with the spec's full Retry-After (60 s, not shortened): the retry_waiting case.
SLOW = ["--latency-ms", "40", "--batch-rate", "12", "--journal"]
FAULTS = FaultConfig(rate=0.3, statuses=[503], retry_after_seconds=60, latency_ms=40.0, seed=13)
QUIET_SECONDS = 4.0  # no paid call answered for this long (40 ms each): a frozen run has none in flight
# (4 s, not 2: with the box's load above 10, an answer received could wait over 2 s to be journalled)
# The landings every clean run makes, however its timing falls: the key check, the roster, the batch (pending,
# submitted, results), the campaign details, the run's figures, and at least one of the chunks. The chunks that
# come back while a landing runs land together (flows/fetchers.py), so a run makes 8 to 19 landings, 14 on a quiet
# box: a point drawn past 8 may never come. Its paid calls: one per VIN and dataset, and the submit.
SURE_LANDINGS = 7 + 1
PAID_CALLS = FLEET_SIZE * len(PAID_PER_VIN) + 1


def _snapshot(read, db: str) -> dict[str, list]:
    return {name: sorted(read(db, sql), key=repr) for name, sql in COMPARE.items()}


def _same_as_uninterrupted(read, db: str, reference: str) -> None:
    """The resumed database holds what the uninterrupted run landed, table for table. One difference is by
    design: a valuation asks with the history's odometer when the fleet file's mileage is below it (view
    vehicle_mileage), and a valuation starts once the history over its VINs has landed (flows/refresh.py). The
    uninterrupted run had every history first, so asked with the odometer; a killed run may have asked a
    valuation while that vehicle's history was still unanswered (its call waiting out a Retry-After), so with
    the file's, and the resumed run keeps that fresh answer. Such a valuation must differ only that way: asked
    with the file's mileage and saying so, never with another figure."""
    resumed, expected = _snapshot(read, db), _snapshot(read, reference)
    by_vin = {row[0]: row for row in resumed.pop("market_values")}
    wanted = {row[0]: row for row in expected.pop("market_values")}
    assert resumed == expected
    assert by_vin.keys() == wanted.keys()
    differing = {vin for vin in by_vin if by_vin[vin] != wanted[vin]}
    mileage = {vin: rest for vin, *rest in read(db, "SELECT vin, valuation_mileage, valuation_mileage_source, file_mileage "
                                                     "FROM vehicle_mileage")}
    asked = dict(read(db, "SELECT vin, mileage_source FROM market_values"))
    mileage_at = next(i for i, (name, *_) in enumerate(read(db, "DESCRIBE market_values")) if name == "mileage")
    for vin in differing:
        chosen, source, in_file = mileage[vin]
        assert (source, by_vin[vin][mileage_at], wanted[vin][mileage_at]) == ("history", in_file, chosen), vin
        assert asked[vin] == "fleet_file", vin


def _calls(sandbox: Sandbox, key: str) -> list[dict]:
    return [c for c in sandbox.journal() if c["key"] == key]


@pytest.fixture(scope="module")
def slow_sandbox():
    """In its own process, so it outlives the killed refresh; slow enough to kill mid-way."""
    sandbox = Sandbox.start_subprocess(SLOW)
    yield sandbox
    sandbox.stop()


@pytest.fixture(scope="module")
def fleet(tmp_path_factory) -> str:
    roster = read_fleet([str(SAMPLE)]).roster.head(FLEET_SIZE)
    path = tmp_path_factory.mktemp("fleet") / "fleet.csv"
    roster.select("unit_number", "vin", "plate", "state", "mileage", "fleet").write_csv(path)
    return str(path)


@pytest.fixture(scope="module")
def read():
    """`read(db_path, sql, params)`: rows of a query against a pipeline database."""

    def run(path: str, sql: str, params: dict | None = None) -> list[tuple]:
        with open_database(path) as db:
            return db.sql(sql, params).rows()

    return run


class Refresh:
    """`fleet refresh` in a child process, its output in a file (a full pipe would stall it)."""

    def __init__(self, fleet: str, workdir: Path, sandbox: Sandbox, key: str, failpoint: str | None = None):
        from prefect.settings import PREFECT_API_URL

        workdir.mkdir(parents=True, exist_ok=True)
        self.key, self.sandbox = key, sandbox
        self.db = str(workdir / "fleet.duckdb")
        self.marker = workdir / "failpoint-reached"
        self.log = workdir / "refresh.log"
        env = {**os.environ, "VDS_BASE_URL": sandbox.url, "VDS_API_KEY": key,
               "PREFECT_API_URL": PREFECT_API_URL.value(), "PYTHONPATH": str(ROOT),
               "PREFECT_LOGGING_TO_API_ENABLED": "false"}  # its log is the file: spare the shared server
        if failpoint:
            env |= {"FLEET_FAILPOINT": failpoint, "FLEET_FAILPOINT_MARKER": str(self.marker)}
        command = [sys.executable, "-m", "fleet_data.flows.cli", "refresh", fleet, "--db", self.db, "--lake", "",
                   "--chunk-size", str(RUN_OPTIONS["chunk_size"]), "--concurrency", str(RUN_OPTIONS["concurrency"])]
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        self.problem: str | None = None
        self.freezes = failpoint is not None  # frozen at a failpoint: killed once its calls are over
        self.paid, self.paid_moved = -1, time.monotonic()
        self.killed = False

    def saw(self, calls: Counter) -> float:
        """Seconds since a paid call of this run was last answered."""
        paid = sum(calls[endpoint] for endpoint in (*PAID, SUBMIT))
        if paid != self.paid:
            self.paid, self.paid_moved = paid, time.monotonic()
        return time.monotonic() - self.paid_moved

    def running(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        if self.running():
            os.kill(self.process.pid, signal.SIGKILL)
            self.killed = True
        self.process.wait(timeout=30)

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-2000:]


def _paid_calls(calls: Counter) -> int:
    return sum(calls[endpoint] for endpoint in (*PAID_PER_VIN.values(), SUBMIT))


def _kill_point(case: str):
    """(failpoint for the child, when to kill it: f(child, calls of its key by endpoint)) for one case."""
    if case == "after_batch_submit":
        return None, lambda child, calls: calls[SUBMIT] >= 1
    if case == "mid_enrichment":
        return None, lambda child, calls: calls["/v2/marketvalue"] >= 6
    if case == "retry_waiting":
        # Every VIN called once per dataset (a 503 among them) and nothing answered for twice the usual
        # quiet: all that is left is retries waiting out their 60 s, and every answer is journalled.
        def waiting(child, calls):
            called = all(calls[endpoint] >= FLEET_SIZE for endpoint in PAID_PER_VIN.values())
            return called and calls[503] >= 1 and child.saw(calls) > 2 * QUIET_SECONDS

        return None, waiting
    if case == "random":
        # Half the time between two calls, half the time inside the n-th landing transaction; both
        # within what a clean run does, so the point is always reached.
        rng = random.Random(SEED)
        if rng.random() < 0.5:
            after = rng.randint(1, PAID_CALLS)
            return None, lambda child, calls: _paid_calls(calls) >= after
        return f"landing:{rng.randint(1, SURE_LANDINGS)}", lambda child, calls: child.marker.exists()
    failpoint = {"during_ingest": "ingest", "submit_accepted_ledger_pending": "batch_submitted",
                 "mid_landing": "landing:8", "after_landing": "landed:3"}[case]
    return failpoint, lambda child, calls: child.marker.exists()


@pytest.fixture(scope="module")
def runs(prefect_server, slow_sandbox, fleet, tmp_path_factory, request):
    """Every selected case's refresh killed at its point, and one reference refresh left to finish.

    They run side by side (each its own database and key) because most of a refresh's time is
    starting Python and Prefect, not work: one after another they would take minutes.
    """
    selected = sorted({item.callspec.params["case"] for item in request.session.items
                       if item.path == request.path and hasattr(item, "callspec")})
    base = tmp_path_factory.mktemp("resume")
    faulty = None
    if "retry_waiting" in selected:  # its faults must not reach the other cases: a sandbox of its own
        faulty = Sandbox.start_subprocess(SLOW)
        request.addfinalizer(faulty.stop)
        faulty.set_faults(FAULTS)
    reference = Refresh(fleet, base / "reference", slow_sandbox, "resume_reference")
    killed, ready = {}, {}
    for case in selected:
        key = f"resume_{case}"
        failpoint, ready[case] = _kill_point(case)
        killed[case] = Refresh(fleet, base / case, faulty if case == "retry_waiting" else slow_sandbox, key, failpoint)
        killed[case].freezes |= case == "retry_waiting"  # no call in flight while retries wait: killed once quiet
    deadline = time.monotonic() + RUNS_BOUND
    try:
        while any(child.running() for child in killed.values()) or reference.running():
            if time.monotonic() > deadline:
                still = [c for c, child in {"reference": reference, **killed}.items() if child.running()]
                seed = f" ({REPLAY})" if "random" in still else ""
                raise AssertionError(f"refreshes still running after {RUNS_BOUND} s: {', '.join(still)}{seed}")
            # Counts by endpoint, key and status: small, unlike the journal.
            sandboxes = {id(child.sandbox): child.sandbox for child in killed.values()}
            served = {at: sandbox.stats()["requests"] for at, sandbox in sandboxes.items()}
            for case, child in killed.items():
                if not child.running():
                    continue
                calls: Counter = Counter()  # answers by endpoint, and by status
                for row in served[id(child.sandbox)]:
                    if row["key"] == child.key:
                        calls[row["endpoint"]] += row["count"]
                        calls[row["status"]] += row["count"]
                quiet = child.saw(calls)
                if ready[case](child, calls) and (not child.freezes or quiet > QUIET_SECONDS):
                    child.kill()
                elif not child.running():
                    child.problem = f"refresh ended before the kill point:\n{child.tail()}"
            time.sleep(0.05)
    finally:
        for child in (reference, *killed.values()):
            child.kill()
    for child in killed.values():  # one that ended between two looks at it, the kill point never met
        if not child.killed and child.problem is None:
            child.problem = f"refresh ended before the kill point:\n{child.tail()}"
    assert reference.process.returncode == 0, reference.tail()
    time.sleep(0.3)  # calls in flight at a kill reach the sandbox's journal before any resume's
    yield reference, killed


def _check_consistent(read, db: str) -> set[tuple[str, str]]:
    """What the killed run left is whole chunks only; returns the (VIN, dataset) answers it landed."""
    vehicles = read(db, "SELECT count(*) FROM vehicles")[0][0]
    assert vehicles in (0, FLEET_SIZE)  # the roster lands in one transaction
    for dataset, endpoint in PAID_PER_VIN.items():
        answered = read(db, "SELECT vin FROM fetch_status WHERE dataset = $d", {"d": dataset})
        # (a 503 is recorded as it comes; its VIN has no answer until the retry's)
        paid = read(db, "SELECT vin FROM api_calls WHERE endpoint = $e AND status NOT IN (429, 500, 502, 503, 504) "
                         "AND vin IS NOT NULL",  # not the key check (connectors/keycheck.py): it asks about no VIN
                    {"e": endpoint})
        assert sorted(answered) == sorted(paid), f"{dataset}: answers and the calls that paid for them differ"
    table_of = {"specs": "specs", "market_value": "market_values"}
    for dataset, table in table_of.items():
        found = read(db, "SELECT vin FROM fetch_status WHERE dataset = $d AND outcome = 'found'", {"d": dataset})
        assert sorted(found) == sorted(read(db, f"SELECT vin FROM {table}")), f"{table} without its fetch_status"
    assert read(db, "SELECT count(*) FROM recall_batches")[0][0] <= 1
    return set(read(db, "SELECT vin, dataset FROM fetch_status"))


CASES = ["during_ingest", "submit_accepted_ledger_pending", "after_batch_submit", "mid_enrichment", "mid_landing",
         "after_landing", "retry_waiting", "random"]


def _journalled(db: str) -> set[tuple[str, str]]:
    """The (VIN, dataset) answers a killed run received and journalled but never landed."""
    saved = set()
    for path in sorted((Path(db).parent / "staging").glob("*/answers/*")):
        journal = read_journal(path)
        answered = journal.final_answers()
        dataset = {"recall_details": "recalls"}.get(journal.dataset, journal.dataset)
        saved |= {(vin, dataset) for vin, outcome in answered if outcome in ("found", "no_data")}
    return saved


def _lost(sandbox: Sandbox, key: str, read, db: str) -> Counter:
    """Paid answers the service billed that `api_calls` never recorded: the calls in flight at a kill.

    Also checks the other way: every paid call recorded was served, and none is recorded twice.
    """
    billed = Counter((c["endpoint"], c["vin"] or "") for c in _calls(sandbox, key)
                     if c["status"] == 200 and c["endpoint"] in PAID)
    recorded = Counter((endpoint, vin or "") for endpoint, vin in read(
        db, "SELECT endpoint, vin FROM api_calls WHERE status = 200 AND endpoint IN (SELECT unnest($paid))",
        {"paid": list(PAID)}))
    assert not recorded - billed, f"calls recorded that the service did not bill: {recorded - billed}"
    return billed - recorded


@pytest.mark.parametrize("case", CASES)
def test_killed_refresh_resumes_without_paying_twice(case, runs, slow_sandbox, fleet, read, monkeypatch):
    try:
        _resumes_without_paying_twice(case, runs, slow_sandbox, fleet, read, monkeypatch)
    except AssertionError as failure:
        if case != "random":
            raise
        raise AssertionError(f"{REPLAY}\n{failure}") from failure


def _resumes_without_paying_twice(case, runs, slow_sandbox, fleet, read, monkeypatch):
    reference, killed = runs
    child = killed[case]
    sandbox = child.sandbox
    assert child.problem is None, child.problem
    assert child.process.returncode == -signal.SIGKILL, child.tail()
    db, key = child.db, child.key
    print(f"{case}: killed at", child.marker.read_text() if child.marker.exists() else f"call {len(_calls(sandbox, key))}")

    landed = _check_consistent(read, db) if Path(db).exists() else set()
    saved = _journalled(db)
    ledger = read(db, "SELECT batch_id FROM recall_batches") if Path(db).exists() else []
    before = len(_calls(sandbox, key))
    submitted_before = sandbox.count(SUBMIT, key=key)
    if case == "retry_waiting":
        # Killed while retries waited: calls answered 503 and not answered since. The service is well again.
        killed_calls = _calls(sandbox, key)
        answered = {(c["endpoint"], c["vin"]) for c in killed_calls if c["status"] == 200}
        waiting = {(c["endpoint"], c["vin"]) for c in killed_calls if c["status"] == 503} - answered
        assert waiting and answered, f"not killed while retries waited: {len(answered)} answered, 503s {waiting}"
        print(f"{case}: {len(waiting)} calls waited out Retry-After: 60 at the kill, {len(answered)} answered")
        sandbox.set_faults(FaultConfig(latency_ms=FAULTS.latency_ms))

    monkeypatch.setenv("VDS_BASE_URL", sandbox.url)
    monkeypatch.setenv("VDS_API_KEY", key)
    resumed = refresh_fleet([fleet], RefreshOptions(db=db, **RUN_OPTIONS))
    assert resumed["status"] == "completed"
    _same_as_uninterrupted(read, db, reference.db)

    # Never pay twice for an answer received: the resume asks for exactly the VINs the killed run
    # had neither landed nor journalled, each once.
    after = _calls(sandbox, key)[before:]
    roster = {vin for (vin,) in read(db, "SELECT vin FROM vehicles")}
    for dataset, endpoint in PAID_PER_VIN.items():
        asked = Counter(c["vin"] for c in after if c["endpoint"] == endpoint)
        assert sorted(asked.elements()) == sorted(roster - {v for v, d in landed | saved if d == dataset}), dataset

    # The service's billing is the referee. Whatever it billed, `api_calls` recorded, except the calls
    # in flight at the kill (answered, never read); the run and its resume together paid what one
    # uninterrupted run paid, plus those calls only. A run frozen at a failpoint lost none.
    lost = _lost(sandbox, key, read, db)
    in_flight = Counter(endpoint for endpoint, _ in lost.elements())
    print(f"{case}: paid answers lost in flight: {dict(in_flight)}")
    if child.freezes:
        assert not lost, f"paid answers lost by a run killed with no call in flight: {lost}"
    else:
        # One chunk per dataset calls at a time, `concurrency` calls at once; each answer is journalled as it
        # arrives: only the calls in flight are lost.
        most = RUN_OPTIONS["concurrency"]
        assert all(n <= most for n in in_flight.values()), f"more lost than in flight: {lost}"
    # Each of them is in the ledger, as a call never answered (`unknown`) at what it may have cost.
    unknown = Counter((endpoint, vin or "") for endpoint, vin in read(
        db, "SELECT endpoint, vin FROM api_calls WHERE billing = 'unknown'"))
    assert not lost - unknown, f"calls billed and missing from the ledger: {lost - unknown}"
    reference_units = slow_sandbox.units(reference.key)
    assert read(reference.db, "SELECT sum(units) FROM api_calls") == [(reference_units,)]
    billed = sandbox.units(key)
    assert billed == reference_units + sum(lost.values()), (billed, reference_units, lost)
    if case == "retry_waiting":  # across both runs, each call the reference had answered was answered (billed) once
        def answers(of: Sandbox, key: str) -> Counter:
            return Counter((c["endpoint"], c["vin"]) for c in _calls(of, key)
                           if c["status"] == 200 and c["endpoint"] in PAID_PER_VIN.values())
        assert answers(sandbox, key) == Counter(set(answers(slow_sandbox, reference.key)))
    known, possible = read(db, "SELECT sum(units) FILTER (WHERE billing = 'known'), "
                               "coalesce(sum(units) FILTER (WHERE billing = 'unknown'), 0) FROM api_calls")[0]
    assert known == billed - sum(lost.values())
    assert known + possible >= billed  # the ledger, unknown calls included, never below the bill

    # The recall batch is billed once. The resume submits only when the ledger has no batch yet or
    # only its `pending:<key>` entry; that resubmission carries the same idempotency key, so the
    # service replays its first answer without billing again. A batch with a real id is polled.
    resubmits = not ledger or ledger[0][0].startswith("pending:")
    assert sandbox.count(SUBMIT, key=key) == submitted_before + resubmits
    if case == "submit_accepted_ledger_pending":
        assert submitted_before == 1 and resubmits  # the nasty window was really hit
    assert read(db, "SELECT count(*), count(DISTINCT idempotency_key) FROM recall_batches") == [(1, 1)]
    assert read(db, "SELECT count(*) FROM recall_batches WHERE batch_id LIKE 'pending:%'") == [(0,)]
    detail_units = sum(sandbox.count(e, key=key, status=200) for e in ("/v1/recalls", "/v1/recalls-ymm"))
    assert sandbox.units(key, "recalls") == FLEET_SIZE + detail_units

    staging = Path(db).parent / "staging"
    assert [p.name for p in staging.iterdir()] == ["recall_batches"]  # the killed run's due lists and journals are gone
    assert not list((staging / "recall_batches").iterdir())  # and every batch's VIN list, once landed


def test_a_landing_that_fails_leaves_its_answers_for_the_next_run(runs, slow_sandbox, fleet, read, tmp_path,
                                                                  monkeypatch):
    """No kill: a chunk's landing transaction fails (a lock, say), so the run fails. What that chunk
    paid for stays journalled, and the next run lands it without calling again."""
    import fleet_data.tasks.steps.refresh_tasks
    import fleet_data.tasks.store.database

    reference, _ = runs
    key = "resume_landing_fails"
    monkeypatch.setenv("VDS_BASE_URL", slow_sandbox.url)
    monkeypatch.setenv("VDS_API_KEY", key)
    db = str(tmp_path / "fleet.duckdb")
    real_land, real_failpoint = fleet_data.tasks.steps.refresh_tasks.land_together, fleet_data.tasks.store.database.failpoint
    landing_market_values, refused, guard = threading.local(), [], threading.Lock()

    def land(store, run_id, chunks):  # the chunks back at once land together: a market value among them is refused
        landing_market_values.on = any(dataset == "market_value" for dataset, _ in chunks)
        try:
            return real_land(store, run_id, chunks)
        finally:
            landing_market_values.on = False

    def failpoint(name):  # inside the transaction: every table written, COMMIT not reached
        with guard:
            refuse = name == "landing" and getattr(landing_market_values, "on", False) and not refused
            refused.extend([name] if refuse else [])
        if refuse:
            raise fleet_data.tasks.store.database.DatabaseError("could not set lock on file (injected)")
        real_failpoint(name)

    monkeypatch.setattr(fleet_data.tasks.steps.refresh_tasks, "land_together", land)
    monkeypatch.setattr(fleet_data.tasks.store.database, "failpoint", failpoint)
    with pytest.raises(Exception, match="injected"):
        refresh_fleet([fleet], RefreshOptions(db=db, **RUN_OPTIONS))
    monkeypatch.setattr(fleet_data.tasks.steps.refresh_tasks, "land_together", real_land)
    monkeypatch.setattr(fleet_data.tasks.store.database, "failpoint", real_failpoint)

    landed = {vin for (vin,) in read(db, "SELECT vin FROM fetch_status WHERE dataset = 'market_value'")}
    saved = {vin for vin, dataset in _journalled(db) if dataset == "market_value"}
    assert saved and not saved & landed  # the refused chunk's answers: journalled, not landed
    assert read(db, "SELECT sum(units) FROM api_calls")[0][0] < slow_sandbox.units(key)  # paid, not yet recorded

    resumed = refresh_fleet([fleet], RefreshOptions(db=db, **RUN_OPTIONS))
    assert resumed["status"] == "completed"
    _same_as_uninterrupted(read, db, reference.db)
    valued = Counter(c["vin"] for c in _calls(slow_sandbox, key) if c["endpoint"] == "/v2/marketvalue")
    assert set(valued.values()) == {1}  # every VIN valued once, across both runs
    billed = slow_sandbox.units(key)
    assert billed == slow_sandbox.units(reference.key)
    assert read(db, "SELECT sum(units) FROM api_calls") == [(billed,)]
    assert not _lost(slow_sandbox, key, read, db)
    assert [p.name for p in (Path(db).parent / "staging").iterdir()] == ["recall_batches"]


# Enough rows (over DuckDB's row group of 122,880) that DuckDB writes them into the database file
# before COMMIT rather than into the WAL at COMMIT: the crash must still leave none of them.
BIG_CHUNK = 300_000
_LAND = """
import sys
import polars as pl
from fleet_data.tasks.store.database import open_database

db = open_database(sys.argv[1])
calls = lambda n, prefix: pl.DataFrame({"call_id": [f"{prefix}{i}" for i in range(n)], "endpoint": ["/specs"] * n})
db.land("api_calls", calls(3, "small-"), "before")
db.land("api_calls", calls(int(sys.argv[2]), "big-"), "killed")  # FLEET_FAILPOINT=landing:2 freezes it before COMMIT
"""


def test_kill_inside_a_big_landing_transaction_leaves_none_of_it(tmp_path, read):
    db = str(tmp_path / "big.duckdb")
    marker = tmp_path / "failpoint-reached"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FLEET_FAILPOINT": "landing:2", "FLEET_FAILPOINT_MARKER": str(marker)}
    process = subprocess.Popen([sys.executable, "-c", _LAND, db, str(BIG_CHUNK)], cwd=ROOT, env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while not marker.exists():
            assert process.poll() is None, process.stderr.read().decode()[-2000:]
            assert time.monotonic() < deadline, "the landing never reached its failpoint"
            time.sleep(0.05)
    finally:
        process.kill()
        process.wait(timeout=30)
    assert process.returncode == -signal.SIGKILL

    # The file opens (WAL replayed), holds the committed landing and nothing of the killed one,
    # and takes the same chunk again.
    assert read(db, "SELECT run_id, count(*) FROM api_calls GROUP BY run_id") == [("before", 3)]
    with open_database(db) as store:
        ids = [f"big-{i}" for i in range(BIG_CHUNK)]
        store.land("api_calls", pl.DataFrame({"call_id": ids, "endpoint": ["/specs"] * BIG_CHUNK}), "again")
    assert sorted(read(db, "SELECT run_id, count(*) FROM api_calls GROUP BY run_id")) == [("again", BIG_CHUNK), ("before", 3)]
