"""Asking the engine workers for a session, from whatever attends it: the play page's consumer
or the API's event stream (both on the server's event loop)."""

from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings

from sessions import channel_messages as messages
from sessions.models import PlaySession
from worldsite.engine_gateway.world_spec import EngineSpec, engine_spec_for


async def engine_start_request(*, session: PlaySession) -> None:
    """Ask the engine workers with room to run `session` (from the play page's consumer or the
    API's event stream, on the server's event loop). A second request for the same session is
    harmless: only one worker can claim it (services.session_claim_worker)."""
    if settings.ENGINE_EMBEDDED:
        from sessions.worker.embedded import ensure_embedded_worker

        ensure_embedded_worker()
    spec = await sync_to_async(session_engine_spec)(session)
    start = messages.engine_start(
        session_id=str(session.pk), allowed_seconds=session.allowed_seconds, spec=dict(spec)
    )
    await get_channel_layer().send(messages.START_CHANNEL, start)


def session_engine_spec(session: PlaySession) -> EngineSpec:
    """The world as the engine opens it, with the seed and picture the player chose, if any."""
    spec = engine_spec_for(session.world)
    if session.seed is not None:
        spec["seed"] = session.seed
    if session.reference_png:
        spec["reference_png"] = bytes(session.reference_png)
    return spec
