"""`{% live_now %}`: the gallery's strip of listed live rooms. A template tag, so the gallery's
own code never imports the play app (the import contracts in pyproject.toml)."""

from django import template

from sessions import room_selectors

register = template.Library()

LIVE_NOW_SHOWN = 8


@register.inclusion_tag("sessions/_live_now.html", takes_context=True)
def live_now(context) -> dict:
    user = context.get("user")
    if user is None or not user.is_authenticated:  # rooms are for members
        return {"rooms": []}
    rooms = list(room_selectors.rooms_live_now()[:LIVE_NOW_SHOWN])
    for room in rooms:
        room.viewer_count = len(room_selectors.room_viewer_names(room=room))
    return {"rooms": rooms}
