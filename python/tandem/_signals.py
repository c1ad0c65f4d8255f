"""SIGTERM while a tandem.Feed is open: the script's own handler still runs, and the feed
ends as the signal asks (tandem.Interrupted where the script has no handler)."""
import os
import signal
import threading


class Interrupted(SystemExit):
    """SIGTERM (a SageMaker stop, a spot interruption, scancel) reached a tandem.Feed. Raised by
    the signal itself where the script has no SIGTERM handler of its own (a SystemExit with code
    75, tandem's "interrupted, run again to resume": uncaught, the process exits 75 after the
    feed wrote its summary), and by Feed() when the stop came while it connected."""

    def __init__(self, message):
        super().__init__(75)
        self.message = message

    def __str__(self):
        return self.message


def _live(handler):
    """`handler` with the handlers of closed feeds' watches taken out of the chain."""
    seen = set()
    while (isinstance(getattr(handler, "__self__", None), _SigtermWatch) and not handler.__self__._installed and
           id(handler.__self__) not in seen):
        seen.add(id(handler.__self__))
        handler = handler.__self__._previous
    return handler


class _SigtermWatch:
    """While a feed is open, SIGTERM is seen by the feed too: the script's own handler (one
    installed before the Feed, or after it: watch() wraps it again) still runs, then the feed
    stops waiting (its iteration ends, or Feed() raises Interrupted); without a handler of the
    script's, the signal raises Interrupted. Only in the main thread (where Python runs signal
    handlers)."""

    def __init__(self):
        self.signalled = False
        self._previous = None
        self._installed = False
        self.watch()

    def watch(self):
        """Installs the watch, wrapping whatever handles SIGTERM now (the script may have
        installed its own since the feed opened)."""
        if threading.current_thread() is not threading.main_thread():
            return
        current = signal.getsignal(signal.SIGTERM)
        if isinstance(getattr(current, "__self__", None), _SigtermWatch) or current in (signal.SIG_IGN, None):
            return  # a feed's watch (this one, or a later feed's, which chains to it); ignored, or set outside Python
        self._previous = _live(current)
        signal.signal(signal.SIGTERM, self._on_sigterm)
        self._installed = True

    def _on_sigterm(self, signum, frame):
        previous = _live(self._previous)
        if self._installed:
            self.signalled = True
        if callable(previous):
            previous(signum, frame)
        elif self._installed:  # SIG_DFL: the process would end here; it ends through the feed instead
            raise Interrupted("stopped by SIGTERM")
        else:  # a closed feed's watch left in a chain: what the default would do
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)

    def restore(self):
        """The script's own handler back; only the main thread may (a close() from another
        thread leaves it to the feed's end in the main thread). A watch another feed wrapped
        is only marked closed: that feed's restore skips it."""
        if not self._installed or threading.current_thread() is not threading.main_thread():
            return
        self._installed = False
        if signal.getsignal(signal.SIGTERM) == self._on_sigterm:
            signal.signal(signal.SIGTERM, _live(self._previous))
