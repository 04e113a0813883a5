"""The untrusted side: a process that runs a submission's cells and answers calls on them.

It is started by :mod:`mini_llm.grading.verify` under the limits of
:mod:`mini_llm.grading.limits` and never sees a test cell: it receives the cells to run (the
instructor's set-up cells and the learner's answer cells) and then calls such as "call
``count_bigrams`` with these arguments" (the arguments may include the tests' own models and
helpers, lent by :mod:`.lending`), and sends back plain data (:mod:`.wire`). Whatever the
submission does in here -- patching NumPy, the check helpers or ``builtins``, exiting, crashing
-- changes only the answers this process gives, never how they are judged.

``python -m mini_llm.grading.sandbox REQUEST_FD REPLY_FD``: requests arrive on one pipe and
replies leave on the other; the learner's printing goes to a capped buffer that comes back
with each reply, so 50 MB of output costs nothing.
"""

from __future__ import annotations

import io
import os
import signal
import sys
from typing import Any

from mini_llm.grading import lending, wire
from mini_llm.grading.withhold import Withheld

MAX_OUTPUT_CHARS = 20_000
TRUNCATED = "more characters of output not shown"


class CappedText(io.TextIOBase):
    """A text stream that keeps the first ``limit`` characters and counts the rest."""

    def __init__(self, limit: int = MAX_OUTPUT_CHARS):
        self.limit, self.parts, self.kept, self.dropped = limit, [], 0, 0

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        text = str(text)
        room = max(self.limit - self.kept, 0)
        self.parts.append(text[:room])
        self.kept += min(len(text), room)
        self.dropped += max(len(text) - room, 0)
        return len(text)

    def take(self) -> str:
        text = "".join(self.parts)
        if self.dropped:
            text += f"\n[... {self.dropped:,} {TRUNCATED}]"
        self.parts, self.kept, self.dropped = [], 0, 0
        return text


def _describe_error(err: BaseException) -> dict:
    types = [f"{t.__module__}.{t.__qualname__}" for t in type(err).__mro__]
    return {"types": types, "message": str(err)[:2000]}


class Server:
    """Runs cells in one IPython shell and answers calls on the names they define."""

    def __init__(self) -> None:
        from IPython.core.interactiveshell import InteractiveShell
        from traitlets.config import Config

        config = Config()
        config.HistoryManager.enabled = False
        config.InteractiveShell.colors = "nocolor"
        config.InteractiveShell.xmode = "Plain"  # short tracebacks, quick to format
        self.shell = InteractiveShell.instance(config=config)
        self.handles: dict[int, Any] = {}
        self.lent: list = []  # what the grader lent for the call being answered
        self.output = CappedText()
        self.busy = False
        self.withheld: Withheld | None = None  # the references of the parts being graded

    def _interrupt(self, signum: int, frame: Any) -> None:
        """SIGINT stops the learner's code, never the server between requests (an interrupt
        sent just as a reply left must not end the process)."""
        if self.busy:
            raise KeyboardInterrupt

    # a value that is not plain data stays here and crosses as a handle
    def _ref(self, value: Any) -> dict:
        self.handles[id(value)] = value
        return {"$ref": id(value), "kind": "callable" if callable(value) else "object"}

    def _resolve(self, token: dict) -> Any:
        if "$obj" in token:
            return self.lent[token["$obj"]]
        if "$ref" in token:
            if token["$ref"] not in self.handles:
                raise LookupError("that object no longer exists in the student's process")
            return self.handles[token["$ref"]]
        return self.shell.user_ns[token["$name"]]

    def _kinds(self, names: list[str]) -> dict[str, str]:
        kinds = {}
        for name in names:
            if name not in self.shell.user_ns:
                kinds[name] = "missing"
            else:
                kinds[name] = "callable" if callable(self.shell.user_ns[name]) else "value"
        return kinds

    def withhold(self, request: dict) -> dict:
        """From now on, the references of the assignment's parts are refused to answers."""
        self.withheld = Withheld(dict(request["parts"]), self.shell.user_ns)
        return {"ok": True}

    def focus(self, request: dict) -> dict:
        """The assignment's other parts are the references while ``part``'s tests run."""
        if self.withheld is not None:
            self.withheld.focus(request.get("part"))
        return {"ok": True}

    def run_cell(self, request: dict) -> dict:
        if self.withheld is not None:  # the instructor's set-up cells may use the references
            self.withheld.focus(None)
            self.withheld.active = not request.get("setup", False)
        result = self.shell.run_cell(request["source"], store_history=False, silent=False)
        if self.withheld is not None and isinstance(request.get("part"), str):
            self.withheld.remember(request["part"])
        error = result.error_before_exec or result.error_in_exec
        return {
            "ok": error is None,
            "error": None if error is None else f"{type(error).__name__}: {error}"[:2000],
            "names": self._kinds(request.get("names", [])),
        }

    def get(self, request: dict) -> dict:
        return {"value": wire.encode(self._resolve(request["target"]), self._ref)}

    def getattr(self, request: dict) -> dict:
        target = self._resolve(request["target"])
        return {"value": wire.encode(getattr(target, request["attr"]), self._ref)}

    def call(self, request: dict) -> dict:
        if self.withheld is not None:
            self.withheld.active = True
        self.lent = lending.unpack(request["lent"], self._resolve) if "lent" in request else []
        target = self._resolve(request["target"])
        args = wire.decode(request["args"], self._resolve)
        kwargs = wire.decode(request["kwargs"], self._resolve)
        result = target(*args, **kwargs)
        # what the call did to its arguments (filled a list, normalised an array in place,
        # moved a random generator on) must be seen by the caller, as in a notebook: each
        # argument whose encoding is no longer the one that arrived goes back
        arrived = dict(enumerate(request["args"])) if isinstance(request["args"], list) else {}
        pairs = request["kwargs"].get("$dict", []) if isinstance(request["kwargs"], dict) else []
        arrived.update((k, v) for k, v in pairs if isinstance(k, str))
        now = {str(i): a for i, a in enumerate(args)}
        now.update(kwargs)
        changed = {}
        for key, value in now.items():
            came = arrived.get(int(key) if key.isdigit() else key)
            if isinstance(came, dict) and "$obj" in came:
                continue  # a lent object goes back whole, below
            if not isinstance(value, (type(None), bool, int, float, str)):
                encoded = wire.encode(value, self._ref)
                if encoded != came:
                    changed[key] = encoded
        lent = [wire.encode(lending.state_of(o), self._ref) for o in self.lent]
        return {"value": wire.encode(result, self._ref), "arguments": changed, "lent": lent}

    def handle(self, request: dict) -> dict:
        operation = {
            "cell": self.run_cell,
            "get": self.get,
            "getattr": self.getattr,
            "call": self.call,
            "withhold": self.withhold,
            "focus": self.focus,
        }.get(request.get("op"))
        if operation is None:
            return {"failure": f"unknown request {request.get('op')!r}"}
        sys.stdout = sys.stderr = self.output
        try:
            self.busy = True
            reply = operation(request)
        except BaseException as err:  # noqa: BLE001 - the learner's error is the answer
            reply = {"raised": _describe_error(err)}
        finally:
            self.busy = False
            sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
        reply["output"] = self.output.take()
        return reply

    def serve(self, requests: int, replies: int) -> None:
        signal.signal(signal.SIGINT, self._interrupt)
        while True:
            try:
                request = wire.receive(requests)
            except EOFError:
                return
            reply = self.handle(request)
            try:
                wire.send(replies, reply)
            except (TypeError, ValueError) as err:
                wire.send(replies, {"failure": f"the reply could not be sent: {err}"})


def main() -> None:
    os.environ.setdefault("MPLBACKEND", "Agg")
    Server().serve(int(sys.argv[1]), int(sys.argv[2]))


if __name__ == "__main__":
    main()
