"""The report says, above everything, which service its answers came from: in red when they are the embedded
sandbox's (made up) or of several services. Databases built row by row; the page built by `fleet report`."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import polars as pl

from fleet_data.flows.cli import main
from fleet_data.tasks.land import frames as staging
from fleet_data.tasks.outputs.report_banner import banner_text
from fleet_data.tasks.store.database import open_database
from fleet_data.tasks.store.published import publish_file

NOW = datetime.now(UTC)
VINS = ["1HGCM82633A004352", "1FTFW1E50KFA12345"]
REAL = "https://api.carsxe.com"


def answer(db, run: str, service: str | None, vins: list[str], at: datetime) -> tuple[str, str]:
    """A run of `service` (None: as a run before services were recorded) answers specs for `vins`; the banner then."""
    db.start_run("refresh", [], {}, run_id=run, started_at=at, service=service)
    frame = pl.DataFrame([{"vin": v, "dataset": "specs", "outcome": "found", "fetched_at": at} for v in vins],
                         schema={"vin": pl.String, "dataset": pl.String, "outcome": pl.String, "fetched_at": staging.TS})
    db.land("fetch_status", frame, run)
    return banner_text(db.query("report_services"))


def test_the_banner_says_which_service_the_data_came_from(tmp_path):
    db = tmp_path / "fleet.duckdb"
    with open_database(db) as store:
        store.land("vehicles", pl.DataFrame({"vin": VINS}), "roster")
        assert banner_text(store.query("report_services")) == ("", "")  # no answer yet: nothing to say
        assert answer(store, "r1", "embedded sandbox", VINS, NOW - timedelta(hours=2)) == ("alert", (
            "Made-up data: all 2 answers on this page came from the embedded sandbox, the local emulator used when no "
            "VDS_API_KEY is set, not from the Vehicle Data Service. Do not act on them."))
        assert answer(store, "r2", REAL, VINS[:1], NOW - timedelta(hours=1)) == ("alert", (
            f"Data from 2 services: the embedded sandbox (made up): 1 answers; {REAL}: 1 answers. Compare like with like."))
        assert answer(store, "r3", REAL, VINS, NOW) == ("info", f"Data from {REAL} (2 answers).")
        kind, text = answer(store, "r4", None, VINS[1:], NOW + timedelta(minutes=1))
        assert kind == "alert" and "an unknown service (answers landed before services were recorded): 1 answers" in text
        answer(store, "r5", "embedded sandbox", VINS, NOW + timedelta(minutes=2))
    publish_file(db)

    out = tmp_path / "report.html"
    assert main(["report", "--db", str(db), "--out", str(out)]) == 0
    page = out.read_text(encoding="utf-8")
    shown = re.search(r'<main>\n<div class="banner" id="banner"><style>[^<]*</style>'
                      r'<div class="service-banner alert" id="service-banner" role="note" '
                      r'data-services="embedded sandbox">Made-up data: all 2 answers[^<]*</div></div>\n', page)
    assert shown, "the banner is not the first thing the page shows"


def test_a_safety_card_never_checked_shows_no_count_not_even_in_its_detail(tmp_path):
    """A fleet whose lien/theft was never asked: the stolen and lien cards show "–", and their detail said
    "0 with any theft record" and "0 with any lien record" beside it, a clean bill nobody gave."""
    db = tmp_path / "fleet.duckdb"
    with open_database(db) as store:
        store.land("vehicles", pl.DataFrame({"vin": VINS}), "roster")
        answer(store, "r1", REAL, VINS, NOW)  # specs only
    publish_file(db)
    out = tmp_path / "report.html"
    assert main(["report", "--db", str(db), "--out", str(out)]) == 0
    page = out.read_text(encoding="utf-8")
    for card in ("stolen-now", "active-liens"):
        shown = re.search(rf'id="{card}" data-value="">–</div><div class="detail">([^<]*)</div>', page)
        assert shown, card
        assert "with any" not in shown.group(1) and "no vehicle was checked for it yet" in shown.group(1), shown.group(1)
