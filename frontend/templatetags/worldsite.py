from django import template

from worldsite.engine_gateway.constants import THEMES_BY_NAME

register = template.Library()


@register.filter
def theme_card_style(theme: str) -> str:
    """The CSS custom properties that paint a theme's placeholder card (style attribute)."""
    info = THEMES_BY_NAME.get(theme)
    if info is None:
        return ""
    return f"--sky: {info.card_sky}; --ground: {info.card_ground}; --sun: {info.card_sun};"


@register.filter
def duration(seconds: int | float | None) -> str:
    """Seconds as a short human duration: '45 s', '3 min 20 s', '1 h 5 min'."""
    total = max(0, int(seconds or 0))
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    if minutes:
        return f"{minutes} min {secs} s" if secs else f"{minutes} min"
    return f"{secs} s"
