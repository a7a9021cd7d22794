"""Channel-layer messages the web side sends about a session (to its page and its worker)."""

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from sessions.worker.service import session_group


def session_closed(*, session_id: str, worker_channel: str, reason: str, failed: bool) -> None:
    layer = get_channel_layer()
    message = {"type": "session.closed", "reason": reason, "failed": failed}
    async_to_sync(layer.group_send)(session_group(session_id), message)
    if worker_channel:
        async_to_sync(layer.send)(
            worker_channel, {"type": "engine.stop", "session_id": session_id, "reason": reason}
        )
