"""Message-rate limits for the play page's channels (WebSocket and data channel)."""

import time


class TokenBucket:
    """Allows `rate` events a second with bursts of `burst`; floods are dropped, not queued."""

    def __init__(self, rate: float, burst: float) -> None:
        self.rate, self.burst = rate, burst
        self.tokens = burst
        self.updated = time.monotonic()

    def allow(self) -> bool:
        now = time.monotonic()
        self.tokens = min(self.burst, self.tokens + (now - self.updated) * self.rate)
        self.updated = now
        if self.tokens >= 1:
            self.tokens -= 1
            return True
        return False
