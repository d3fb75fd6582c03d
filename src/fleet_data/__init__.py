"""fleet-data: fleet files in, fresh vehicle data out (README.md).

The package as installed and as tools see it: `fleet_data.connectors`, `fleet_data.flows`, `fleet_data.tasks`
and the SQL files under `fleet_data/sql`. In the repository those folders stay at the top level, where the
project was specified; this folder gives them the package's name through links (`src/fleet_data/tasks ->
../../tasks`), so the wheel, the editable install, mypy, pyright, coverage and import graphs all read one
regular package, `fleet_data` (docs/development.md, "Layout").
"""
