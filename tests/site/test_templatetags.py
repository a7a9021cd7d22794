import pytest

from frontend.templatetags.worldsite import duration


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (None, "0 s"),
        (-5, "0 s"),
        (45, "45 s"),
        (60, "1 min"),
        (200, "3 min 20 s"),
        (3600, "1 h"),
        (3900, "1 h 5 min"),
    ],
)
def test_duration(seconds, text):
    assert duration(seconds) == text
