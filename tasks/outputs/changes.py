"""What a run changed (the `changes` table, written as its answers landed: sql/changes/).

Reads the counts a run summary leads with, builds the message `--notify` posts (JSON with a
Slack-compatible `text`), posted by the task in tasks/steps/refresh_tasks.py through connectors/notify.py.
"""

from __future__ import annotations

import json
from typing import Any

from fleet_data.tasks.store.database import Database
from fleet_data.tasks.outputs.summary import change_lines

PARK_NOW_LISTED = 10  # vehicles named in the summary and the message's text; the rows list them all
POSTED_AT_MOST = 1000  # changes in one message; `truncated` says when there were more
NOTHING = {"total": 0, "vehicles": 0, "park_now": 0, "park_outside": 0, "by_kind": {}, "park_now_vehicles": []}


def run_changes(db: Database, run_id: str) -> dict[str, Any]:
    """The run's changes in figures: totals, per kind (most severe first), the vehicles to park now."""
    counts = db.query("change_counts_of_run", run_id=run_id).to_dicts()
    if not counts:
        return dict(NOTHING)
    parked: dict[str, dict[str, Any]] = {}
    for row in db.query("changes_of_run", run_id=run_id, severity="park_now", limit=10 * PARK_NOW_LISTED).to_dicts():
        vehicle = parked.setdefault(row["vin"], {"vin": row["vin"], "unit_number": row["unit_number"], "campaigns": []})
        vehicle["campaigns"].append(row["subject"])
    first = counts[0]
    return {"total": int(first["total"]), "vehicles": first["vehicles"], "park_now": first["park_now"],
            "park_outside": first["park_outside"], "by_kind": {r["kind"]: r["changes"] for r in counts},
            "park_now_vehicles": list(parked.values())[:PARK_NOW_LISTED]}


def lead_with_changes(summary: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """The summary with `changes` right after its status: what `--json` and the artifact show first."""
    head: dict[str, Any] = {k: summary[k] for k in ("run_id", "kind", "status") if k in summary}
    return {**head, "changes": changes, **{k: v for k, v in summary.items() if k not in head and k != "changes"}}


def change_message(db: Database, run_id: str, kind: str = "refresh") -> dict[str, Any]:
    """What `--notify` posts: the figures, every change (most severe first) and a `text` for Slack."""
    figures = run_changes(db, run_id)
    rows = db.query("changes_of_run", run_id=run_id, severity=None, limit=POSTED_AT_MOST).to_dicts()
    for row in rows:
        row["before"] = json.loads(row["before"]) if row["before"] else None
        row["after"] = json.loads(row["after"]) if row["after"] else None
        row["fetched_at"] = row["fetched_at"].isoformat()
    text = "\n".join([f"fleet {kind} {run_id}: what changed since the vehicles' previous answers",
                      *change_lines(figures, strong=lambda s: f"*{s}*")])
    return {"text": text, "run_id": run_id, "kind": kind, **figures, "changes": rows,
            "truncated": figures["total"] > len(rows)}
