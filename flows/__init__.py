"""The project's flows and its command line.

Every process that runs one of these flows imports this package first — a
``microstock`` command, ``microstock serve``, a worker's flow run — so this is
where the project's log lines are routed into the run's log
(:func:`tasks.orchestration.environment.route_run_logs`; it imports no Prefect).
"""

from tasks.orchestration.environment import route_run_logs

route_run_logs()
