"""How to replay parked jobs, said for the server at hand: the UI's way only where it works.

The UI replays through the ``replay-dead-letters`` deployment, which exists
only on a server something deployed to (``microstock serve``, ``prefect
deploy --all``); the workdir's own server, which ``microstock run`` starts,
has none, and "Deployments → replay-dead-letters" would point at an empty
page. So the server is asked once whether it has that deployment; when it
cannot be asked, both ways are said plainly.
"""

from __future__ import annotations

#: The deployment a replay from the UI runs (prefect.yaml: flow ``replay-dead-letters``, deployment of that name).
REPLAY_DEPLOYMENT = "replay-dead-letters/replay-dead-letters"

#: The UI's way, where the deployment exists.
UI_PATH = "**Deployments → replay-dead-letters → Run → Custom run**, switch `dry_run` off"

TERMINAL = "`microstock replay --apply`"


def replay_deployed() -> bool | None:
    """Whether the Prefect server of this process has the ``replay-dead-letters`` deployment; None when it cannot
    be asked (no server, an error)."""
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound

    try:
        with get_client(sync_client=True) as client:
            client.read_deployment_by_name(REPLAY_DEPLOYMENT)
    except ObjectNotFound:
        return False
    except Exception:  # noqa: BLE001 — any failure to ask: say both ways, never fail the artifact for it
        return None
    return True


def replay_how(deployed: bool | None) -> str:
    """``replay with …``: the UI's way and the terminal's where the deployment exists (``deployed``), the terminal's
    alone where it does not, both with where each works when it is not known."""
    if deployed:
        return f"replay with the `replay-dead-letters` deployment ({UI_PATH}) or {TERMINAL}"
    if deployed is None:
        return f"replay with {TERMINAL}; or, on a server under `microstock serve`, from the UI: {UI_PATH}"
    return (f"replay with {TERMINAL} (this server has no replay deployment to run from the UI; "
            "`microstock serve` adds one)")


def ui_replay_note(deployed: bool | None) -> str:
    """The UI's way as a sentence to add where the terminal's is already said (empty where it does not work)."""
    if deployed:
        return f"From the UI: {UI_PATH}."
    if deployed is None:
        return f"On a server under `microstock serve`, from the UI: {UI_PATH}."
    return ""
