"""The Service: one ledger and one policy, shared by every request the HTTP layer serves.

    service = Service.open(policy="p.policy", ledger="ledger-dir", roster="roster.toml", key="service.key")
    proposal = service.propose(agent, "refund", {"order": "#1"}, run="r-1")
    state = await service.wait(proposal.request, timeout=30)
    service.decide(reviewer, request, "approve", digest=...)
    service.close()

Gates (ledger.workflow.gate) are projections that catch up: the service keeps one Gate for every
thread (SharedGate). A step gives up the Gate's lock while its commit is in flight, so requests
served by different threads commit together (group commit: one write and one sync for every
step that arrives meanwhile) and each event is folded once. One more Gate, the watch, follows the ledger in a thread of its own: it wakes
the clients waiting for a decision and feeds the event streams, and its steps expire requests
whose deadline passed (silence rejects).

Identities come from the roster (service.auth): a proposal's proposer is the agent's principal,
a decision's author the reviewer's. Every decision the service records is signed with the
service's key (signer "service", docs/ledger-format.md section 11), attesting that it
authenticated that reviewer; the roster must list the key under a principal of kind `service`.

Errors: ServiceError (start-up: a policy, roster or key that cannot be used; the message says
which file and where), and from the methods ApiError (service.errors) or the Gate's exceptions,
which service.errors.from_exception maps to stable codes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from dsl import Policy, PolicyError
from ledger.clock import Clock, utc_now
from ledger.proof.decisions import Signing
from ledger.proof.keys import CheckpointError, SigningKey, load_signing_key
from ledger.proof.roster import Principal, Roster, RosterError, load_roster
from ledger.store.log import LedgerCorrupt, Record
from ledger.workflow import describe
from ledger.workflow.errors import CallIdConflict
from ledger.workflow.gate import Gate, Proposal
from ledger.workflow.machine import RequestState, UnknownRequest
from service.errors import FORBIDDEN, TOO_MANY_STREAMS, ApiError

log = logging.getLogger("countersign.service")

WAITING = frozenset({"pending", "interrupting"})
WATCH_SECONDS = 0.5
"""How long the watch sleeps in the ledger's change notification before it takes a step anyway
(a step expires what is due: a deadline fires within this many seconds)."""
EARLIER_IN_RUN = 10
"""How many of the run's earlier calls a request in full lists (an agent: those of them it proposed)."""
STREAM_QUEUE_ITEMS = 1_000
"""Events queued for one event stream (each a small dict of a few hundred bytes). A client that
reads slower than its run is written fills its queue; the stream is then ended, and the client
resumes with Last-Event-ID, reading what it missed from the ledger."""
MAX_STREAMS_PER_PRINCIPAL = 8
"""Event streams one principal may hold open at once (429 `too_many_streams` beyond)."""
NOTIFY_DRAIN_SECONDS = 2.0
"""How long a stopping service keeps sending the notifications that are due (the rest wait for
the next start: service.notify's cursor)."""


END = None
"""The last item of a stream's queue that was full: the stream ends (service.core.Service.open_stream)."""


class ServiceError(Exception):
    """The service cannot start (or reload) with these files; the message says which and why."""


@dataclass
class Loaded:
    """What the service decides with: the policy, the roster, and the service's own principal."""

    policy: Policy
    roster: Roster
    principal: Principal


def load(policy_path: str | Path, roster_path: str | Path, key: SigningKey) -> Loaded:
    """Read and check the policy and the roster, and find the service's principal: the one of
    kind `service` listing `key`. Raises ServiceError."""
    try:
        roster = load_roster(roster_path)
    except RosterError as exc:
        raise ServiceError(str(exc)) from None
    try:
        policy = Policy.load(policy_path, groups=roster.groups())  # `approvers N from G` may name a roster group
    except PolicyError as exc:
        raise ServiceError(exc.render()) from None  # file:line:col, the line, carets (several lines)
    except OSError as exc:
        raise ServiceError(f"{policy_path}: cannot read the policy: {exc.strerror or exc}") from None
    found = roster.key(key.name, key.public.id.hex())
    if found is None or found[0].kind != "service":
        raise ServiceError(
            f"{roster.source}: no principal of kind \"service\" lists the service's key {key.public.text()}: add "
            "[[principal]] name = \"countersign\", kind = \"service\", keys = [\"<that text>\"] to the roster "
            "(the key signs every decision the service records; ledger verify --roster checks it)")
    return Loaded(policy, roster, found[0])


class SharedGate:
    """One Gate on the ledger, used by every thread at once (`with shared.gate() as g:`): each
    step gives up the Gate's lock while its commit is in flight, so steps that arrive together
    share one write and one sync (group commit), and every event is folded once, by one
    projection. `close` waits for the steps in flight, then closes the Gate (its snapshot is
    saved)."""

    def __init__(self, gate: Gate):
        self._gate = gate
        self._cond = threading.Condition()
        self._users = 0
        self._closed = False

    @contextlib.contextmanager
    def gate(self) -> Iterator[Gate]:
        with self._cond:
            if self._closed:
                raise ApiError(503, "shutting_down", "the service is shutting down")
            self._users += 1
        try:
            yield self._gate
        finally:
            with self._cond:
                self._users -= 1
                self._cond.notify_all()

    def close(self, timeout: float = 30.0) -> None:
        with self._cond:
            self._closed = True
            self._cond.wait_for(lambda: self._users == 0, timeout)
        self._gate.close()


@dataclass
class _Waiters:
    """Clients waiting on the watch: futures by request, event queues by run, and how many
    streams each principal holds open (asyncio objects of the server's loop, touched only from it)."""

    requests: dict[int, list[asyncio.Future]] = field(default_factory=dict)
    runs: dict[str, list[asyncio.Queue]] = field(default_factory=dict)
    streams: dict[str, int] = field(default_factory=dict)


class Service:
    """The approval service's state and operations (module docstring). Thread-safe: the HTTP
    layer calls the blocking methods from worker threads and the `async` ones from its loop."""

    def __init__(self, *, policy: str | Path, ledger: str | Path, roster: str | Path, key: str | Path,
                 clock: Clock = utc_now, public_url: str = "", trust_snapshot: bool = False,
                 webhooks: str | Path | None = None, deliveries: str | Path | None = None):
        self.policy_path, self.roster_path, self.ledger_path = Path(policy), Path(roster), Path(ledger)
        self.clock = clock
        self.public_url = public_url.rstrip("/")
        try:
            self.key = load_signing_key(key)
        except (CheckpointError, OSError) as exc:
            raise ServiceError(f"{key}: {exc}") from None
        self.signing = Signing(self.key, "service")
        webhook_config = None
        if webhooks is not None:  # checked before the ledger is touched: a bad file changes nothing
            from service.webhooks import WebhooksError, load_webhooks

            try:
                webhook_config = load_webhooks(webhooks)
            except WebhooksError as exc:
                raise ServiceError(str(exc)) from None
        self.loaded = load(self.policy_path, self.roster_path, self.key)
        self.policies: dict[str, Policy] = {self.loaded.policy.digest: self.loaded.policy}  # for edits of older calls
        self._reload_lock = threading.Lock()
        # The first Gate replays the whole ledger, checking every decision under this roster: the
        # snapshot lives in the ledger's directory, as writable as the ledger (trust_snapshot skips it).
        self.shared = SharedGate(self._open_gate(self.loaded.policy, full_verify=not trust_snapshot))
        with self.shared.gate() as gate:  # opens the ledger (creating it), and records what the service runs with
            self._record(gate)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._waiters = _Waiters()
        self._watch: Gate | None = None
        self._watch_thread: threading.Thread | None = None
        self._stop = threading.Event()
        self.listeners: list[Callable[[list[Record]], None]] = []
        """Called from the watch thread with the events every writer appended, in order, once
        each, after the watch folded them (notifications use it: service.notify). A listener
        must be quick, and never raise (what it raises is logged and dropped)."""
        self.notifier = None
        """The webhooks' Notifier (service.notify) when `webhooks` names a file, else None."""
        if webhooks is not None:
            self.notifier = self._notifier(webhook_config, deliveries)
            self.listeners.append(self.notifier)

    # --- set-up -------------------------------------------------------------------------------

    def _notifier(self, config, deliveries: str | Path | None):
        from service.notify import Notifier

        if not self.public_url:
            log.warning("notifications carry no link to the inbox: start the service with --public-url")
        with self.shared.gate() as gate:
            ledger = gate.ledger
            return Notifier(config, lookup=self.watched, ledger_id=ledger.ledger_id, directory=ledger.cache_dir(),
                            public_url=self.public_url, deliveries=deliveries)

    def watched(self, request: int) -> RequestState:
        """The request as the watch last folded it. Only for listeners (the watch's thread), and
        for the notifier's catch-up before the watch starts. Raises UnknownRequest."""
        assert self._watch is not None
        return self._watch.get(request, refresh=False)

    def _open_gate(self, policy: Policy | None = None, *, full_verify: bool = False) -> Gate:
        """A Gate that trusts only what this service vouches for: decisions signed as its roster
        requires, calls its policies decided (Gate.require_signatures, Gate.trust_policies), from
        the first event it folds. Raises ServiceError when the ledger does not verify so."""
        try:
            return Gate(policy, self.ledger_path, clock=self.clock, full_verify=full_verify,
                        signers=self.loaded.roster, trusted_policies=self.policies)
        except LedgerCorrupt as exc:
            raise ServiceError(f"{self.ledger_path}: the ledger does not verify, so the service does not start: {exc} "
                               f"(`countersign ledger verify {self.ledger_path} --roster ...` says more)") from None

    def _record(self, gate: Gate) -> None:
        """Record the roster's digest (and the policy's, where the Gate can) in the ledger, unless
        the last ones recorded are the same."""
        gate.record_roster(self.loaded.roster, self.loaded.principal.name)
        record_policy = getattr(gate, "record_policy", None)
        if record_policy is not None:
            record_policy(self.loaded.policy, self.loaded.principal.name)

    @property
    def roster(self) -> Roster:
        return self.loaded.roster

    @property
    def policy(self) -> Policy:
        return self.loaded.policy

    @contextlib.contextmanager
    def gate(self) -> Iterator[Gate]:
        """The service's Gate (shared by every thread), deciding with the current policy."""
        with self.shared.gate() as gate:
            yield gate

    def reload(self, by: str) -> dict:
        """Read the policy and the roster again and record their digests (issue 11: on SIGHUP or
        an admin's call). A file that does not load leaves everything as it was. Returns
        {"policy", "policy_digest", "roster_digest", "changed"}. Raises ServiceError."""
        with self._reload_lock:
            loaded = load(self.policy_path, self.roster_path, self.key)
            changed = (loaded.policy.digest != self.loaded.policy.digest or loaded.roster.digest != self.loaded.roster.digest)
            self.loaded = loaded
            self.policies[loaded.policy.digest] = loaded.policy
            with self.gate() as gate:
                gate.require_signatures(loaded.roster)  # before it is recorded: its decisions are checked from then on
                gate.trust_policies(self.policies)
                if self._watch is not None:
                    self._watch.require_signatures(loaded.roster)
                self._record(gate)
                gate.policy = loaded.policy
            log.info("reloaded by %s: policy %s (%s), roster %s", by, loaded.policy.name, loaded.policy.digest[:12],
                     loaded.roster.digest[:12])
            return {"policy": loaded.policy.name, "policy_digest": loaded.policy.digest,
                    "roster_digest": loaded.roster.digest, "changed": changed}

    # --- agents -------------------------------------------------------------------------------

    def propose(self, agent: Principal, tool: str, args: Any, *, run: str | None = None, context: Any = None,
                call_id: str | None = None) -> Proposal:
        with self.gate() as gate:
            try:
                proposal = gate.propose(tool, args, proposer=agent.name, run=run, context=context, call_id=call_id)
            except CallIdConflict:  # the Gate's message names the first request: maybe another agent's
                raise ApiError(409, "call_id_conflict", f"call id {call_id!r} was proposed before with another tool, "
                               "arguments, proposer or context; use a new, unguessable call id") from None
            if proposal.duplicate and gate.get(proposal.request, refresh=False).policy_digest not in self.policies:
                raise ApiError(409, "call_id_conflict", f"call id {call_id!r} was proposed before under a policy this "
                               "service does not hold: propose with a new, unguessable call id")
            return proposal

    def own(self, principal: Principal, state: RequestState) -> RequestState:
        """`state`, when `principal` may read it: an agent its own calls, anyone else any.
        Raises ApiError 403."""
        if principal.kind == "agent" and state.proposer != principal.name:
            raise ApiError(403, FORBIDDEN, f"request {state.request} was proposed by another agent", state.request)
        return state

    def get(self, principal: Principal, request: int) -> RequestState:
        with self.gate() as gate:
            return self.own(principal, gate.get(request))

    def in_full(self, principal: Principal, request: int) -> dict:
        with self.gate() as gate:
            state = self.own(principal, gate.get(request))
            item = describe.in_full(gate, request, earlier=EARLIER_IN_RUN)
            if principal.kind == "agent":  # a run's name is the agents' choice: another agent's calls in it are not theirs
                others = {s.request for s in gate.earlier_in_run(request, limit=EARLIER_IN_RUN)
                          if s.proposer != principal.name}
                item["earlier_in_run"] = [e for e in item["earlier_in_run"] if e["request"] not in others]
        item["may_decide"] = describe.may_decide(state, principal.name)
        return item

    def find(self, principal: Principal, call_id: str) -> RequestState:
        with self.gate() as gate:
            state = gate.find(call_id=call_id)
        if state is None or (principal.kind == "agent" and state.proposer != principal.name):
            # another agent's call id is answered as an unknown one: a 403 would tell that it was used
            raise ApiError(404, "unknown_call_id", f"no call was proposed with the id {call_id!r}")
        return state

    def start(self, agent: Principal, request: int) -> Any:
        with self.gate() as gate:
            state = self.own(agent, gate.get(request))
            if state.proposer != agent.name:
                raise ApiError(403, FORBIDDEN, "only the agent that proposed a call runs it", request)
            return gate.start(request, executor=agent.name)

    def finish(self, agent: Principal, request: int, *, outcome: str, result: Any = None, error: str | None = None,
               keep_result: bool = False, result_digest: str | None = None):
        with self.gate() as gate:
            state = self.own(agent, gate.get(request))
            if state.proposer != agent.name:
                raise ApiError(403, FORBIDDEN, "only the agent that proposed a call reports its outcome", request)
            return gate.finish(request, outcome=outcome, result=result, error=error, keep_result=keep_result,
                               result_digest=result_digest)

    # --- reviewers ----------------------------------------------------------------------------

    def queue(self, principal: Principal, *, tool: str | None = None, run: str | None = None,
              group: str | None = None, limit: int | None = None, everyone: bool = False) -> tuple[list[dict], int]:
        """The pending requests `principal` may decide, oldest first (with `everyone`, an admin's
        or a reviewer's view of every pending request), and how many pending ones were left out
        because they may not decide them. `group`: only requests a quorum of that roster group
        or policy group may decide."""
        with self.gate() as gate:
            rows = gate.pending(tool=tool, run=run)
            if group is not None:
                rows = [s for s in rows if s.requirements and any(q.group == group for q in s.requirements.quorums)]
            mine = rows if everyone else [s for s in rows if describe.may_decide(s, principal.name)]
            hidden = len(rows) - len(mine)
            if limit is not None:
                mine = mine[:limit]
            args = gate.arguments_of(mine, checked=False)
            out = []
            for s in mine:
                item = describe.brief(None, s, args=args.get(s.request))
                item["may_decide"] = describe.may_decide(s, principal.name)
                out.append(item)
        return out, hidden

    def decide(self, reviewer: Principal, request: int, decision: str, *, digest: str, args: Any = None,
               reason: str | None = None, message: str | None = None, comment: str | None = None,
               remember: str | None = None, pattern: str | None = None) -> RequestState:
        """Record `reviewer`'s decision, signed by the service. `decision`: approve, edit,
        reject, respond, or cancel (a reviewer who may decide it, or the proposing agent).
        `remember`, `pattern`: make an approval or a rejection standing (Gate.approve)."""
        with self.gate() as gate:
            state = gate.get(request)
            if decision == "cancel":
                if remember is not None or pattern is not None:
                    raise ApiError(422, "invalid_call", "only an approval or a rejection can be remembered", request)
                if reviewer.kind == "agent" and state.proposer != reviewer.name:
                    raise ApiError(403, FORBIDDEN, "an agent cancels only its own calls", request)
                return gate.cancel(request, by=reviewer.name, reason=reason, digest=digest, signing=self.signing)
            if reviewer.kind != "reviewer":
                raise ApiError(403, FORBIDDEN, f"{reviewer.name} is a {reviewer.kind}; only a reviewer decides", request)
            # an edit re-enters the policy that decided the call (an older one, after a reload)
            policy = self.policies.get(state.policy_digest, self.loaded.policy) if decision == "edit" else None
            return gate.decide(request, decision, by=reviewer.name, digest=digest, args=args, reason=reason,
                               message=message, comment=comment, signing=self.signing, policy=policy,
                               remember=remember, pattern=pattern)

    def forget(self, reviewer: Principal, standing: int, reason: str | None = None) -> None:
        """Revoke the standing decision at seq `standing` (Gate.forget), as `reviewer`: the calls
        it allowed that have not started are cancelled, signed by the service."""
        if reviewer.kind != "reviewer":
            raise ApiError(403, FORBIDDEN, f"{reviewer.name} is a {reviewer.kind}; only a reviewer forgets a standing decision")
        with self.gate() as gate:
            gate.forget(standing, by=reviewer.name, reason=reason, signing=self.signing)

    def history(self, principal: Principal, *, tool: str | None = None, run: str | None = None,
                status: str | None = None, decided_by: str | None = None, text: str | None = None,
                before: int | None = None, limit: int = 50) -> list[dict]:
        """Requests newest first, filtered (`text`: in the tool, run, call id, reasons or the
        decision's reason, case-insensitive); an agent sees only its own."""
        needle = text.casefold() if text else None

        def match(s: RequestState) -> bool:
            if principal.kind == "agent" and s.proposer != principal.name:
                return False
            if (tool and s.tool != tool) or (run and s.run != run) or (status and s.status != status):
                return False
            if decided_by and s.decided_by != decided_by and decided_by not in s.approvers:
                return False
            if needle:
                hay = " ".join(x for x in (s.tool, s.run, s.call_id, s.reason, *s.reasons) if x).casefold()
                return needle in hay
            return True

        with self.gate() as gate:
            rows = gate.recent(before=before, limit=limit, match=match)
        out = []
        for s in rows:
            item = describe.brief(None, s, args=None)
            del item["args"]
            item.update(describe.outcome(s))
            out.append(item)
        return out

    # --- waiting and streams --------------------------------------------------------------

    def start_watch(self, loop: asyncio.AbstractEventLoop) -> None:
        """Start the watch thread, which wakes waiters on `loop`."""
        self._loop = loop
        self._watch = self._open_gate()
        if self.notifier is not None:  # what a previous run left unsent, before the watch delivers anything newer
            self.notifier.catch_up(self._watch.ledger.records_at, self._watch.seen)
            self.notifier.start()
        self._watch_thread = threading.Thread(target=self._follow, name="countersign-watch", daemon=True)
        self._watch_thread.start()

    def _follow(self) -> None:
        watch = self._watch
        assert watch is not None
        while not self._stop.is_set():
            try:
                seen = watch.seen
                watch.ledger.wait_for_growth(WATCH_SECONDS, since=seen)
                if self._stop.is_set():
                    return
                watch.refresh()  # folds what every writer appended, and expires what is due
                if watch.seen > seen:
                    self._deliver(watch, seen)
            except LedgerCorrupt as exc:  # tampering: nothing more is delivered; the API answers 503
                log.error("the ledger does not verify; the watch stopped (no more notifications or wake-ups): %s", exc)
                if self._loop is not None:
                    self._loop.call_soon_threadsafe(self._wake, set(self._waiters.requests), [])
                return
            except Exception:  # a watch that dies would leave every waiter asleep: log, pause, go on
                log.exception("the ledger watch failed; retrying")
                self._stop.wait(1.0)

    def _deliver(self, watch: Gate, seen: int) -> None:
        """Wake the waiters of requests whose state changed after seq `seen`, and queue the new
        events for the streams of their runs."""
        loop, waiters = self._loop, self._waiters
        if loop is None or (not waiters.requests and not waiters.runs and not self.listeners):
            return
        records = watch.ledger.records_at(list(range(seen + 1, watch.seen + 1)))
        if self.listeners:
            ordered = [records[seq] for seq in sorted(records)]
            for listener in list(self.listeners):
                try:
                    listener(ordered)
                except Exception:
                    log.exception("a listener of the ledger watch failed")
        touched: dict[int, tuple[str | None, str]] = {}  # request → (run, proposer)
        items = []
        for seq in sorted(records):
            item = describe.stream_item(records[seq])
            request = item["request"]
            if request is None:
                continue
            if request not in touched:
                try:
                    state = watch.get(request, refresh=False)
                    touched[request] = (state.run, state.proposer)
                except UnknownRequest:
                    touched[request] = (None, "")
            items.append((*touched[request], item))
        loop.call_soon_threadsafe(self._wake, set(touched), items)

    def _wake(self, requests: set[int], items: list[tuple[str | None, str, dict]]) -> None:
        for request in requests:
            for future in self._waiters.requests.get(request, ()):
                if not future.done():
                    future.set_result(None)
        for run, proposer, item in items:
            for queue in list(self._waiters.runs.get(run, ())) if run is not None else ():
                try:
                    queue.put_nowait((proposer, item))
                except asyncio.QueueFull:  # its client reads too slowly: end the stream (it resumes from its last id)
                    self._end_stream(run, queue)

    def _end_stream(self, run: str, queue: asyncio.Queue) -> None:
        """Empty a full queue, put END in it, and feed it no more."""
        while not queue.empty():
            queue.get_nowait()
        queue.put_nowait(END)
        queues = self._waiters.runs.get(run, [])
        if queue in queues:
            queues.remove(queue)

    async def wait(self, principal: Principal, request: int, timeout: float) -> tuple[RequestState, bool]:
        """Wait until the request is decided (no longer pending) or `timeout` seconds pass.
        Returns its state and whether it is still waiting. Call from the server's loop."""
        from starlette.concurrency import run_in_threadpool

        loop = asyncio.get_running_loop()
        end = loop.time() + timeout
        while True:
            future = loop.create_future()
            self._waiters.requests.setdefault(request, []).append(future)
            try:
                state = await run_in_threadpool(self.get, principal, request)
                left = end - loop.time()
                if state.status not in WAITING or left <= 0:
                    return state, state.status in WAITING
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(future, left)
            finally:
                futures = self._waiters.requests.get(request, [])
                if future in futures:
                    futures.remove(future)
                if not futures:
                    self._waiters.requests.pop(request, None)

    def open_stream(self, run: str, principal: Principal | None = None) -> asyncio.Queue:
        """A queue of the run's new events, from the watch: (the request's proposer,
        describe.stream_item dict) pairs, at most STREAM_QUEUE_ITEMS; when it is full, the
        watch empties it and puts END, the last item (the stream must end). Give it back with
        close_stream. Call from the server's loop. Raises ApiError 429 `too_many_streams` when
        `principal` holds MAX_STREAMS_PER_PRINCIPAL open already."""
        if principal is not None:
            held = self._waiters.streams.get(principal.name, 0)
            if held >= MAX_STREAMS_PER_PRINCIPAL:
                raise ApiError(429, TOO_MANY_STREAMS, f"{principal.name} holds {held} event streams open already, the "
                               "most one principal may; close one first")
            self._waiters.streams[principal.name] = held + 1
        queue: asyncio.Queue = asyncio.Queue(maxsize=STREAM_QUEUE_ITEMS)
        self._waiters.runs.setdefault(run, []).append(queue)
        return queue

    def close_stream(self, run: str, queue: asyncio.Queue, principal: Principal | None = None) -> None:
        """Give back a queue of open_stream (the same `run` and `principal`)."""
        queues = self._waiters.runs.get(run, [])
        if queue in queues:
            queues.remove(queue)
        if not queues:
            self._waiters.runs.pop(run, None)
        if principal is not None:
            held = self._waiters.streams.get(principal.name, 0) - 1
            if held > 0:
                self._waiters.streams[principal.name] = held
            else:
                self._waiters.streams.pop(principal.name, None)

    @contextlib.contextmanager
    def subscribe(self, run: str, principal: Principal | None = None) -> Iterator[asyncio.Queue]:
        """open_stream, given back on leaving the block."""
        queue = self.open_stream(run, principal)
        try:
            yield queue
        finally:
            self.close_stream(run, queue, principal)

    def run_events(self, principal: Principal, run: str, since: int) -> list[dict]:
        """The stored events after seq `since` of the run's requests (those `principal` may
        read), oldest first: what a stream sends before the new ones."""
        with self.gate() as gate:
            states = gate.recent(match=lambda s: s.run == run and (principal.kind != "agent" or s.proposer == principal.name),
                                 limit=1_000)
            seqs = sorted(seq for s in states for seq in s.seqs if seq > since)
            records = gate.ledger.records_at(seqs)
        return [describe.stream_item(records[seq]) for seq in seqs if seq in records]

    # --- shutting down ------------------------------------------------------------------------

    def close(self) -> None:
        """Stop the watch and close every Gate once the requests in flight have returned (their
        commits finish: a step is durable before it is answered)."""
        self._stop.set()
        if self._watch_thread is not None:
            self._watch_thread.join(timeout=WATCH_SECONDS * 4)
        if self.notifier is not None:
            self.notifier.stop(drain_seconds=NOTIFY_DRAIN_SECONDS)
        self.shared.close()
        if self._watch is not None:
            self._watch.close()
