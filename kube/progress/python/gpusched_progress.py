"""Report a training job's progress to gpusched (standard library only).

Three lines in a PyTorch loop::

    from gpusched_progress import Reporter
    reporter = Reporter()
    reporter.report(step)  # in the loop, e.g. after optimizer.step()

``report`` never blocks and never raises: it sends the cumulative step in
a background thread, at most one report per ``interval`` seconds (5 by
default, the server's rate) and never while one is in flight; other calls
are dropped (the next one carries the steps). A failure is logged once, at
WARNING, on the logger "gpusched_progress"; later ones at DEBUG.

Configuration, from the environment (see kube/docs/progress.md):

- GPUSCHED_PROGRESS_URL: the channel's https URL (without it the reporter
  does nothing, after one log line);
- GPUSCHED_PROGRESS_TOKEN_FILE: the projected service account token,
  /var/run/secrets/gpusched/token by default, read again at every report
  (the kubelet rotates it);
- GPUSCHED_PROGRESS_CA_FILE: a PEM bundle of CAs to trust besides the
  system's (optional).
"""

import json
import logging
import math
import os
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

__all__ = ["Reporter"]

ENV_URL = "GPUSCHED_PROGRESS_URL"
ENV_TOKEN_FILE = "GPUSCHED_PROGRESS_TOKEN_FILE"
ENV_CA_FILE = "GPUSCHED_PROGRESS_CA_FILE"
DEFAULT_TOKEN_FILE = "/var/run/secrets/gpusched/token"
PATH = "/v1/progress"
MAX_STEPS = 1e15

log = logging.getLogger("gpusched_progress")


class Reporter:
    """Sends a job's cumulative steps to gpusched's progress channel.

    Safe to call from several threads; ``report`` returns at once.
    """

    def __init__(self, url=None, token_file=None, ca_file=None, interval=5.0, timeout=2.0):
        self.interval = float(interval)
        self.timeout = float(timeout)
        self.token_file = token_file or os.environ.get(ENV_TOKEN_FILE) or DEFAULT_TOKEN_FILE
        self.last_error = None  # the last report's failure, or None
        self.sent = 0  # reports the server took
        self._lock = threading.Lock()
        self._thread = None
        self._next = 0.0  # time.monotonic() before which nothing is sent
        self._warned = False
        self._url = None
        self._ctx = None
        url = url or os.environ.get(ENV_URL, "")
        try:
            if not url:
                raise ValueError("%s is not set: reports are off" % ENV_URL)
            parts = urllib.parse.urlsplit(url)
            if parts.scheme != "https" or not parts.netloc:
                raise ValueError("%s must be an https URL" % ENV_URL)
            if parts.path in ("", "/"):
                parts = parts._replace(path=PATH)
            self._url = urllib.parse.urlunsplit(parts)
            self._ctx = ssl.create_default_context()
            ca_file = ca_file or os.environ.get(ENV_CA_FILE)
            if ca_file:
                self._ctx.load_verify_locations(cafile=ca_file)
        except Exception as e:  # never raise into the training script
            self._url = None
            self._fail(e)

    @property
    def enabled(self):
        """Whether reports are sent (a valid https URL was configured)."""
        return self._url is not None

    def report(self, step):
        """Report the cumulative steps (an int, float or 1-element tensor).

        Returns True if a report was started, False if it was dropped.
        Never blocks, never raises.
        """
        try:
            if self._url is None:
                return False
            steps = float(step.item() if hasattr(step, "item") else step)
            if not (0 <= steps <= MAX_STEPS) or math.isnan(steps):
                raise ValueError("steps %r not in [0, 1e15]" % (steps,))
            with self._lock:
                now = time.monotonic()
                if (self._thread is not None and self._thread.is_alive()) or now < self._next:
                    return False
                self._next = now + self.interval
                t = threading.Thread(target=self._send, args=(steps,), name="gpusched-progress", daemon=True)
                self._thread = t
            t.start()
            return True
        except Exception as e:
            self._fail(e)
            return False

    def wait(self, timeout=None):
        """Wait for the report in flight, if any (e.g. at the end of training)."""
        t = self._thread
        if t is not None:
            t.join(timeout)

    def _send(self, steps):
        try:
            with open(self.token_file, "r") as f:
                token = f.read(65536).strip()
            if not token:
                raise ValueError("token file %s is empty" % self.token_file)
            body = json.dumps({"steps": steps}, allow_nan=False).encode()
            req = urllib.request.Request(self._url, data=body, method="POST", headers={
                "Authorization": "Bearer " + token,
                "Content-Type": "application/json",
            })
            with urllib.request.urlopen(req, timeout=self.timeout, context=self._ctx) as res:
                res.read(4096)
            self.last_error = None
            self.sent += 1
        except urllib.error.HTTPError as e:
            retry = e.headers.get("Retry-After", "") if e.headers else ""
            if retry.isdigit():
                with self._lock:
                    self._next = max(self._next, time.monotonic() + min(int(retry), 3600))
            msg = ""
            try:
                msg = json.loads(e.read(4096) or b"{}").get("message", "")
            except Exception:
                pass
            self._fail(RuntimeError("server answered %d %s" % (e.code, msg)))
        except Exception as e:
            self._fail(e)

    def _fail(self, err):
        self.last_error = err
        if not self._warned:
            self._warned = True
            log.warning("gpusched progress reports fail (further failures at DEBUG): %s", err)
        else:
            log.debug("gpusched progress report failed: %s", err)
