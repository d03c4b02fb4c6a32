"""One progress bar per long task, on stderr: tqdm when installed, else a plain-text line.

tqdm comes with the ``train`` extra; the env package itself stays free of it, so without
tqdm the bar is a ``\\r``-rewritten line (``[#####.....] 3/10 episodes, 1.2 s``) and, when
stderr is not a terminal, one line at the end only (a log file gets no carriage returns).
"""

from __future__ import annotations

import sys
import time
from types import TracebackType
from typing import Any, TextIO


class PlainBar:
    """The fallback bar: the tqdm methods this project uses (``update``, ``set_postfix``,
    ``write``, ``close``), drawn with plain text."""

    width = 30

    def __init__(self, total: int, desc: str, unit: str, stream: TextIO) -> None:
        self.total, self.desc, self.unit, self.stream = total, desc, unit, stream
        self.n = 0
        self.postfix = ""
        self.started = time.perf_counter()
        self.live = stream.isatty()

    def _line(self) -> str:
        filled = int(self.width * self.n / self.total) if self.total else self.width
        seconds = time.perf_counter() - self.started
        extra = f", {self.postfix}" if self.postfix else ""
        return (f"{self.desc}: [{'#' * filled}{'.' * (self.width - filled)}] {self.n}/{self.total} {self.unit}, "
                f"{seconds:.1f} s{extra}")

    def update(self, n: int = 1) -> None:
        self.n += n
        if self.live:
            print("\r" + self._line(), end="", file=self.stream, flush=True)

    def set_postfix(self, **values: Any) -> None:
        self.postfix = ", ".join(f"{k}={v}" for k, v in values.items())

    def write(self, text: str) -> None:
        """Print a message above the bar (the bar is redrawn after it)."""
        if self.live:
            print("\r\033[K" + text, file=self.stream)
            print(self._line(), end="", file=self.stream, flush=True)
        else:
            print(text, file=self.stream)

    def close(self) -> None:
        print(("\r" if self.live else "") + self._line(), file=self.stream, flush=True)

    def __enter__(self) -> PlainBar:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


def progress_bar(total: int, desc: str, unit: str = "it", *, stream: TextIO | None = None) -> Any:
    """A progress bar over ``total`` units: a ``tqdm`` when tqdm is installed, else a :class:`PlainBar`."""
    stream = stream or sys.stderr
    try:
        from tqdm import tqdm
    except ImportError:
        return PlainBar(total, desc, unit, stream)
    return tqdm(total=total, desc=desc, unit=unit, file=stream, dynamic_ncols=True)
