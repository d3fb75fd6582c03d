"""The fleet report's style sheet, script and page template (tasks/outputs/report_page.py renders the page in them)."""

# Phones (<= 640 px): narrower margins, one column, and each table row a labelled card (the labels are the
# tables' own rules, written by report_page.Page), so nothing scrolls sideways and no row hides behind an
# inner scroll. Collapsed parts (<details>) keep long lists out of the way until asked for. Print: no
# shadows, every collapsed part open, no page breaks inside a row or a chart.
CSS = """
*,*::before,*::after{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#1d2733;background:#f4f6f8}
header{background:#1d2733;color:#fff;padding:18px 28px}header h1{margin:0;font-size:22px}
header p{margin:4px 0 0;color:#b8c4d0;font-size:13px;overflow-wrap:anywhere}main{padding:12px 28px 40px}
.banner:empty{display:none}
.cards{display:grid;grid-template-columns:repeat(auto-fit,minmax(min(170px,100%),1fr));gap:12px;margin:10px 0 14px}
.card{background:#fff;border-radius:8px;padding:10px 14px;box-shadow:0 1px 2px #0002;border:1px solid #e3e8ee}
.card.alert{border-left:5px solid #c0392b}.card .label{color:#5b6b7b;font-size:12px;text-transform:uppercase}
.card .value{font-size:24px;font-weight:600;margin:2px 0;overflow-wrap:anywhere}.card .detail{color:#5b6b7b;font-size:12px}
section{background:#fff;border-radius:8px;padding:6px 18px 16px;margin:16px 0;box-shadow:0 1px 2px #0002}
#todo{border-top:4px solid #c0392b}#todo .card{box-shadow:none}
h2{font-size:18px;margin:12px 0 6px}h3{font-size:15px;margin:16px 0 6px}
details{margin:8px 0}details>summary{cursor:pointer;font-weight:600;padding:4px 0}
details.section>summary h2{display:inline;font-size:18px}details.section>summary{padding:8px 0 4px}
.grid{display:grid;grid-template-columns:repeat(auto-fit,minmax(min(420px,100%),1fr));gap:16px;align-items:start}
.grid>*{min-width:0}
figure.chart-box{margin:6px 0;min-width:0}figcaption{font-weight:600;font-size:14px;margin:8px 0 4px}
svg.bars{display:block;overflow:visible}svg.bars text{font-size:12px;fill:#1d2733}svg.bars .total{font-weight:600}
ul.legend{list-style:none;margin:2px 0 0;padding:0;display:flex;flex-wrap:wrap;gap:2px 12px;font-size:12px;color:#3c4a58}
.swatch{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:4px}
.note{color:#5b6b7b;font-size:12px;margin:4px 0}.empty{color:#5b6b7b;font-style:italic}
.table-wrap{margin:6px 0;max-width:100%}
table{border-collapse:collapse;width:100%;font-size:13px}
th{background:#e9eef3;text-align:left;padding:5px 8px;cursor:pointer;vertical-align:bottom}
th[aria-sort=ascending]::after{content:" ▲"}th[aria-sort=descending]::after{content:" ▼"}
td{padding:4px 8px;border-bottom:1px solid #eef1f4;overflow-wrap:anywhere}td.when{white-space:nowrap}
td.num{text-align:right;font-variant-numeric:tabular-nums}
code{background:#eef1f4;padding:0 3px;border-radius:3px}
@media (max-width:1000px){main{padding:10px 14px 32px}section{padding:6px 10px 14px}th,td{padding:3px 4px}}
@media (max-width:640px){
  header{padding:14px 12px}main{padding:6px 8px 24px}section{padding:4px 10px 12px;margin:12px 0}
  .cards{gap:8px;grid-template-columns:repeat(2,minmax(0,1fr))}.card{padding:8px 10px}.card .value{font-size:20px}
  table.cards-on-phone,table.cards-on-phone tbody,table.cards-on-phone tr,table.cards-on-phone td{display:block;width:100%}
  table.cards-on-phone thead{display:none}
  table.cards-on-phone tbody tr{border-top:1px solid #cfd6dd;padding:3px 0}
  table.cards-on-phone td{display:flex;justify-content:space-between;gap:12px;border:0;padding:0;text-align:right;
    line-height:1.35}
  table.cards-on-phone td:empty{display:none}
  table.cards-on-phone td::before{color:#5b6b7b;text-align:left;flex:none;max-width:45%}
  td.when{white-space:normal}
}
@media print{
  @page{margin:12mm}
  body{background:#fff;font-size:11px;-webkit-print-color-adjust:exact;print-color-adjust:exact}
  header{background:#fff;color:#000;padding:0 0 6px;border-bottom:2px solid #1d2733}header p{color:#333}
  main{padding:0}section,.card{box-shadow:none;border:1px solid #cfd6dd}section{padding:4px 8px 10px}
  table{font-size:10px}th,td{padding:2px 4px}
  .grid{display:block}details>summary{list-style:none}
  h2,h3,figcaption,summary{break-after:avoid}tr,.card,figure.chart-box{break-inside:avoid}
  thead{display:table-header-group}
}
"""

# Click a header to sort by that column (numbers by their data-sort value, empty cells last), again to reverse.
# Printing opens every collapsed part (and closes again those it opened once printed): paper has no clicks.
SCRIPT = """
document.querySelectorAll("table.sortable th").forEach(function (th) {
  th.addEventListener("click", function () {
    var table = th.closest("table"), body = table.tBodies[0], col = th.cellIndex;
    var ascending = th.getAttribute("aria-sort") !== "ascending";
    table.querySelectorAll("th").forEach(function (h) { h.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
    var key = function (row) { var td = row.cells[col]; return td.hasAttribute("data-sort") ? td.getAttribute("data-sort") : td.textContent.trim(); };
    var rows = Array.prototype.slice.call(body.rows);
    var numeric = rows.every(function (r) { var k = key(r); return k === "" || !isNaN(Number(k)); });
    rows.sort(function (a, b) {
      var x = key(a), y = key(b);
      if (x === "" || y === "") { return (x === "") - (y === ""); }
      var order = numeric ? Number(x) - Number(y) : x.localeCompare(y);
      return ascending ? order : -order;
    });
    rows.forEach(function (r) { body.appendChild(r); });
  });
});
var openedForPrint = [];
function openForPrint() {
  document.querySelectorAll("details:not([open])").forEach(function (d) { d.open = true; openedForPrint.push(d); });
}
function closeAfterPrint() {
  openedForPrint.forEach(function (d) { d.open = false; });
  openedForPrint = [];
}
window.addEventListener("beforeprint", openForPrint);
window.addEventListener("afterprint", closeAfterPrint);
if (window.matchMedia) {
  window.matchMedia("print").addEventListener("change", function (m) { if (m.matches) { openForPrint(); } else { closeAfterPrint(); } });
}
"""

# {banner}: a line above everything else (report_page.banner), hidden while empty.
PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{csp}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>{css}</style>
</head>
<body>
<header><h1>{title}</h1><p>{subtitle}</p></header>
<main>
<div class="banner" id="banner">{banner}</div>
{sections}
</main>
<script>{script}</script>
</body>
</html>
"""
