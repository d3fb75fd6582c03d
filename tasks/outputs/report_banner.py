"""The fleet report's banner: which service the data on the page came from, above everything else.

The embedded sandbox's answers are made up (a local emulator, used when no key is set): a page built on them
says so in red, and so does a page that mixes services. Read from `report_services` (view `answer_services`).
"""

from __future__ import annotations

import html

import polars as pl

STYLE = ("<style>.service-banner{border-radius:8px;padding:10px 14px;margin:14px 0 0;font-weight:600}"
         ".service-banner.info{background:#eaf2fb;border-left:5px solid #2c7fb8}"
         ".service-banner.alert{background:#fdecea;border-left:5px solid #c0392b}</style>")


def _name(service: str | None) -> str:
    return "an unknown service (answers landed before services were recorded)" if service is None else service


def banner_text(services: pl.DataFrame) -> tuple[str, str]:
    """(kind, text): `alert` when any answer is made up or several services answered, else `info`; ('', '') without answers."""
    if not services.height:
        return "", ""
    rows = services.to_dicts()
    made_up = sum(r["answers"] for r in rows if r["made_up"])
    total = sum(r["answers"] for r in rows)
    if made_up == total:
        return "alert", (f"Made-up data: all {total:,} answers on this page came from the embedded sandbox, the local "
                         "emulator used when no VDS_API_KEY is set, not from the Vehicle Data Service. Do not act on them.")
    said = "; ".join(f"{_name(r['service']) if not r['made_up'] else 'the embedded sandbox (made up)'}: "
                     f"{r['answers']:,} answers" for r in rows)
    if len(rows) > 1:
        return "alert", f"Data from {len(rows)} services: {said}. Compare like with like."
    return "info", f"Data from {_name(rows[0]['service'])} ({total:,} answers)."


def service_banner(services: pl.DataFrame) -> str:
    """The banner's HTML (with its own style); empty without answers."""
    kind, text = banner_text(services)
    if not kind:
        return ""
    names = ",".join("" if s is None else s for s in services["service"].to_list())
    return (f'{STYLE}<div class="service-banner {kind}" id="service-banner" role="note" '
            f'data-services="{html.escape(names, quote=True)}">{html.escape(text)}</div>')
