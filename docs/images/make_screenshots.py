"""The web inbox's documentation screenshots, taken of a demo ledger with a realistic history.

    .venv/bin/python docs/images/make_screenshots.py                 # rewrites docs/images/inbox-*.png
    .venv/bin/python docs/images/make_screenshots.py --out /tmp/shots --keep /tmp/demo

Writes inbox-queue.png (a supervisor's queue), inbox-request.png (a pending request a
supervisor edited, with its diff and the decision forms) and inbox-dashboard.png (the charts)
into `--out` (default: this folder). `--keep DIR` (a new or empty folder) leaves the demo's
ledger, roster, service key and tokens (tokens.txt) in DIR (else a temporary folder, removed); `countersign ledger verify
DIR/ledger --roster DIR/roster.toml` verifies it, every decision signed.

How: five days of a retail support desk under samples/retail.policy, replayed through the Gate
with a ManualClock (ledger.clock) that ends a minute ago, so the dashboard's charts, which read
the events' timestamps, show days of work, and the pending requests' deadlines (counted down
against the wall clock) are still ahead. Agents look customers up, cancel, return, exchange and
change addresses; six reviewers (three at the desk, three supervisors) decide each at their own
pace (desk-1 sometimes approves within seconds, a rubber stamp; the supervisors take hours), edit, reject
with a reason, or let requests expire. Every decision is signed with the service's key, as
`countersign serve` signs them. The ledger is then served by the real service (service.core.Service
and service.app.create_app under uvicorn on 127.0.0.1) and photographed by Playwright driving
Debian's Chromium (/usr/bin/chromium), as tests/test_web_browser.py does. The history is drawn
from a seeded random generator: the same seed gives the same history, shifted to end now.
"""

from __future__ import annotations

import argparse
import heapq
import itertools
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(REPO))

from dsl import Policy
from ledger.clock import ManualClock, utc_now
from ledger.proof.decisions import Signing
from ledger.proof.keys import generate_key, write_keypair
from ledger.proof.roster import load_roster, token_hash
from ledger.store.log import Ledger
from ledger.workflow.gate import Gate, GateError
from ledger.workflow.machine import Violation

POLICY = REPO / "samples" / "retail.policy"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
SERVICE = "countersign"
AGENTS = ("agent-1", "agent-2", "agent-3")
DESK = ("desk-1", "desk-2", "desk-3")  # the policy's groups (samples/retail.policy)
SUPERVISORS = ("sup-1", "sup-2", "sup-3")
DAYS = 5
MINUTE, HOUR = 60, 3600

FIRST = ["Yusuf", "Mei", "Sofia", "Omar", "Lucas", "Aarav", "Ivan", "Chen", "Fatima", "Noah", "Amelia", "Ethan",
         "Olivia", "Raj", "Harper", "Emma", "Mason", "Isabella", "Daiki", "Lei"]
LAST = ["Rossi", "Kovacs", "Hernandez", "Ahmed", "Silva", "Patel", "Petrov", "Wang", "Khan", "Moore", "Garcia",
        "Lopez", "Nguyen", "Sanchez", "Ito", "Muller", "Brown", "Kim", "Santos", "Taylor"]
CITIES = [("Seattle", "WA", "98101"), ("Denver", "CO", "80202"), ("Austin", "TX", "78701"),
          ("Chicago", "IL", "60601"), ("Boston", "MA", "02108"), ("Phoenix", "AZ", "85004")]
STREETS = ["Pike St", "Elm Ave", "Maple Dr", "Cedar Ln", "Oak St", "Lakeview Rd", "Hillcrest Ave"]


class Demo:
    """The demo's history: actions on a time line (seconds since the start), run in order
    through one Gate whose ManualClock is set to each action's time."""

    def __init__(self, folder: Path, seed: int, end: datetime):
        self.rng = random.Random(seed)
        self.folder = folder
        self.end = end
        self.start = end - timedelta(days=DAYS)
        self.span = (end - self.start).total_seconds()
        self.clock = ManualClock(self.start)
        self.policy = Policy.load(POLICY)
        self.key = generate_key("countersign-service")
        self.key_path, _ = write_keypair(folder / "service", self.key)
        self.tokens = {name: f"cst_demo-token-of-{name}" for name in (*AGENTS, *DESK, *SUPERVISORS)}
        self.roster_path = folder / "roster.toml"
        self.roster_path.write_text(self._roster_text())
        (folder / "tokens.txt").write_text("".join(f"{name} {token}\n" for name, token in self.tokens.items()))
        self.roster = load_roster(self.roster_path)
        self.signing = Signing(self.key, "service")
        self.ledger_path = folder / "ledger"
        self.gate = Gate(self.policy, Ledger(self.ledger_path, clock=self.clock, exclusive=True), clock=self.clock,
                         roster=self.roster, operator=SERVICE)
        self.gate.record_policy(self.policy, SERVICE)
        self.queue: list[tuple[float, int, Callable[[], None]]] = []
        self.order = itertools.count()
        self.runs = itertools.count(1041)
        self.refused: list[str] = []
        self.shown: dict[str, int] = {}  # the requests the screenshots show, by role

    def _roster_text(self) -> str:
        lines = []
        for name in AGENTS:
            lines += ["[[principal]]", f'name = "{name}"', 'kind = "agent"', f'token_sha256 = ["{token_hash(self.tokens[name])}"]', ""]
        for name in (*DESK, *SUPERVISORS):
            lines += ["[[principal]]", f'name = "{name}"', 'kind = "reviewer"',
                      f'token_sha256 = ["{token_hash(self.tokens[name])}"]', ""]
        lines += ["[[principal]]", f'name = "{SERVICE}"', 'kind = "service"', f'keys = ["{self.key.public.text()}"]', ""]
        return "\n".join(lines)

    # --- the time line ------------------------------------------------------------------------

    def at(self, seconds: float, action: Callable[[], None]) -> None:
        heapq.heappush(self.queue, (seconds, next(self.order), action))

    def play(self) -> None:
        while self.queue:
            seconds, _, action = heapq.heappop(self.queue)
            moment = self.start + timedelta(seconds=seconds)
            if moment > self.clock():
                self.clock.set(moment)
            try:
                action()
            except (Violation, GateError) as exc:  # e.g. a second approval after the deadline passed
                self.refused.append(f"{type(exc).__name__}: {exc}")
        self.clock.set(self.end - timedelta(seconds=30))
        self.gate.expire()
        self.events = self.gate.ledger.head[0]
        self.gate.close()

    # --- customers and their calls ------------------------------------------------------------

    def customer(self) -> dict:
        first, last = self.rng.choice(FIRST), self.rng.choice(LAST)
        city, state, zip_code = self.rng.choice(CITIES)
        return {"first": first, "last": last, "user_id": f"{first.lower()}_{last.lower()}_{self.rng.randint(1000, 9999)}",
                "email": f"{first.lower()}.{last.lower()}{self.rng.randint(10, 9999)}@example.com",
                "city": city, "state": state, "zip": zip_code,
                "order": f"#W{self.rng.randint(1000000, 9999999)}",
                "card": f"credit_card_{self.rng.randint(1000000, 9999999)}",
                "gift": f"gift_card_{self.rng.randint(1000000, 9999999)}",
                "paypal": f"paypal_{self.rng.randint(1000000, 9999999)}"}

    def items(self, n: int) -> list[str]:
        return [str(self.rng.randint(1000000000, 9999999999)) for _ in range(n)]

    def address(self, c: dict) -> dict:
        return {"address1": f"{self.rng.randint(10, 990)} {self.rng.choice(STREETS)}", "address2": "",
                "city": c["city"], "state": c["state"], "country": "USA", "zip": c["zip"]}

    def lookups(self, c: dict) -> list[tuple[str, dict]]:
        first = (("find_user_id_by_email", {"email": c["email"]}) if self.rng.random() < 0.5 else
                 ("find_user_id_by_name_zip", {"first_name": c["first"], "last_name": c["last"], "zip": c["zip"]}))
        calls = [first, ("get_user_details", {"user_id": c["user_id"]}), ("get_order_details", {"order_id": c["order"]})]
        if self.rng.random() < 0.4:
            calls.append(("get_product_details", {"product_id": self.items(1)[0]}))
        return calls

    # --- an agent's run -----------------------------------------------------------------------

    def conversation(self, t: float, calls: list[tuple[str, dict]], review: Callable[[float, int, str], None] | None,
                     agent: str | None = None, run: str | None = None) -> None:
        """Propose `calls` one after the other from time `t` (allowed ones run at once); the
        last is the change the reviewers decide: `review(t, request, agent)` schedules them."""
        agent = agent or self.rng.choice(AGENTS)
        run = run or f"run-{next(self.runs)}"
        for i, (tool, args) in enumerate(calls):
            t += self.rng.uniform(4, 40)
            last = i == len(calls) - 1
            self.at(t, lambda tool=tool, args=args, last=last, at=t: self.propose(at, agent, run, tool, args,
                                                                                 review if last else None))

    def propose(self, t: float, agent: str, run: str, tool: str, args: dict,
                review: Callable[[float, int, str], None] | None) -> None:
        p = self.gate.propose(tool, args, proposer=agent, run=run)
        if p.effect == "allow":
            self.gate.execute(p.request, lambda a: {"ok": True}, executor=agent)
        elif p.effect == "ask" and review is not None:
            review(t, p.request, agent)

    def execute_later(self, t: float, request: int, agent: str) -> None:
        def run() -> None:
            if self.gate.get(request).executable:
                self.gate.execute(request, lambda a: {"ok": True}, executor=agent)
        self.at(t + self.rng.uniform(1, 6), run)

    # --- reviewers ----------------------------------------------------------------------------

    def desk_delay(self, who: str) -> float:
        """desk-1 stamps some of its approvals within seconds; desk-2 takes minutes; desk-3 longer."""
        if who == "desk-1":
            return self.rng.uniform(2, 8) if self.rng.random() < 0.15 else self.rng.uniform(30, 4 * MINUTE)
        if who == "desk-2":
            return self.rng.uniform(1, 12) * MINUTE
        return self.rng.uniform(4, 27) * MINUTE

    def approve(self, request: int, who: str) -> None:
        self.gate.approve(request, approver=who, digest=self.gate.get(request).digest, signing=self.signing)

    def edit(self, request: int, who: str, change: dict, reason: str) -> None:
        args = {**self.gate.arguments(request), **change}
        self.gate.edit(request, editor=who, args=args, reason=reason, digest=self.gate.get(request).digest,
                       signing=self.signing)

    def reject(self, request: int, who: str, reason: str) -> None:
        self.gate.reject(request, approver=who, reason=reason, digest=self.gate.get(request).digest, signing=self.signing)

    def edit_odds(self, t: float) -> float:
        """The odds that a desk reviewer edits an ask proposed at `t` (seconds since the start);
        the report's screenshot (make_report_screenshot.py) raises them over time, as drift."""
        return 0.12

    def desk_review(self, rejection: str, edit: tuple[dict, str] | None = None):
        """A desk ask (one from desk, 30 minutes): approved mostly, sometimes edited, rejected or left to expire."""
        def review(t: float, request: int, agent: str) -> None:
            roll = self.rng.random()
            who = self.rng.choices(DESK, weights=(5, 3, 2))[0]
            later = t + self.desk_delay(who)
            if roll < 0.08:
                return  # nobody looked in time: the deadline rejects it
            if roll < 0.22:
                self.at(later + MINUTE, lambda: self.reject(request, who if who != "desk-1" else "desk-2", rejection))
            elif edit is not None and roll < 0.22 + self.edit_odds(t):
                self.at(later + 2 * MINUTE, lambda: self.edit(request, who, *edit))
                self.execute_later(later + 2 * MINUTE, request, agent)
            else:
                self.at(later, lambda: self.approve(request, who))
                self.execute_later(later, request, agent)
        return review

    def supervisor_review(self, rejection: str, edit: tuple[dict, str] | None):
        """Two supervisors within 4 hours: both approve, or one edits and another approves, or one rejects."""
        def review(t: float, request: int, agent: str) -> None:
            roll = self.rng.random()
            first, second = self.rng.sample(SUPERVISORS, 2)
            t1 = t + self.rng.uniform(10 * MINUTE, 100 * MINUTE)
            t2 = t1 + self.rng.uniform(3 * MINUTE, 90 * MINUTE)
            if roll < 0.08:
                return
            if roll < 0.25:
                self.at(t1, lambda: self.reject(request, first, rejection))
                return
            if edit is not None and roll < 0.5:
                self.at(t1, lambda: self.edit(request, first, *edit))
            else:
                self.at(t1, lambda: self.approve(request, first))
            self.at(t2, lambda: self.approve(request, second))
            self.execute_later(t2, request, agent)
        return review

    def anyone_review(self, t: float, request: int, agent: str) -> None:
        """The policy's default ask (a tool no rule covers, 1 hour): anyone approves, rejects or responds."""
        who = self.rng.choice((*DESK, *SUPERVISORS))
        later = t + self.rng.uniform(2, 40) * MINUTE
        roll = self.rng.random()
        if roll < 0.4:
            self.at(later, lambda: self.gate.respond(request, approver=who, signing=self.signing, message=(
                "Credits over $25 need a manager; offer the customer a 10% coupon code instead.")))
        elif roll < 0.7:
            self.at(later, lambda: self.approve(request, who))
            self.execute_later(later, request, agent)
        else:
            self.at(later, lambda: self.reject(request, who, "We do not give credit for shipping delays under 3 days."))

    # --- the scenarios ------------------------------------------------------------------------

    def scenario(self, t: float, latest_big: bool) -> None:
        c = self.customer()
        calls = self.lookups(c)
        kinds = ["lookup", "cancel", "address", "user_address", "payment", "return_small", "exchange_small",
                 "transfer", "credit"] + (["big"] * 2 if latest_big else [])
        kind = self.rng.choices(kinds, weights=[14, 12, 8, 5, 5, 12, 9, 5, 4] + ([8, 8] if latest_big else []))[0]
        if kind == "lookup":
            self.conversation(t, calls, None)
        elif kind == "cancel":
            if self.rng.random() < 0.25:  # a reason the policy refuses: the agent asks the customer and retries
                calls.append(("cancel_pending_order", {"order_id": c["order"], "reason": "too expensive"}))
            calls.append(("cancel_pending_order", {"order_id": c["order"],
                                                   "reason": self.rng.choice(["no longer needed", "ordered by mistake"])}))
            self.conversation(t, calls, self.desk_review(
                "The customer wrote that they still want the order; ask them to confirm the cancellation first."))
        elif kind == "address":
            a = self.address(c)
            calls.append(("modify_pending_order_address", {"order_id": c["order"], **a}))
            self.conversation(t, calls, self.desk_review(
                "The order has already shipped; offer a return instead.",
                ({"zip": c["zip"][:-1] + str((int(c["zip"][-1]) + 1) % 10)}, "The customer spelled out the zip code again.")))
        elif kind == "user_address":
            calls.append(("modify_user_address", {"user_id": c["user_id"], **self.address(c)}))
            self.conversation(t, calls, self.desk_review("Confirm the new address with the customer by email first."))
        elif kind == "payment":
            calls.append(("modify_pending_order_payment", {"order_id": c["order"], "payment_method_id": c["paypal"]}))
            self.conversation(t, calls, self.desk_review("That PayPal account is not verified; ask for another method."))
        elif kind in ("return_small", "exchange_small"):
            n = self.rng.choice((1, 2))
            if kind == "return_small":
                call = ("return_delivered_order_items", {"order_id": c["order"], "item_ids": self.items(n),
                                                         "payment_method_id": c["gift"]})
            else:
                call = ("exchange_delivered_order_items", {"order_id": c["order"], "item_ids": self.items(n),
                                                           "new_item_ids": self.items(n), "payment_method_id": c["card"]})
            if self.rng.random() < 0.15:  # a malformed order id first: denied with an instruction
                calls.append((call[0], {**call[1], "order_id": c["order"][1:]}))
            calls.append(call)
            self.conversation(t, calls, self.desk_review(
                "One of these items was delivered more than 30 days ago; return only the others.",
                ({"payment_method_id": c["card"]}, "Refunds go to the original payment method.")))
        elif kind == "transfer":
            if self.rng.random() < 0.5:
                calls.append(("transfer_to_human_agents", {"summary": "refund"}))
            calls.append(("transfer_to_human_agents", {"summary": f"{c['first']} wants a refund to a card that was "
                                                                  "closed last week; the order was delivered damaged."}))
            self.conversation(t, calls, None)
        elif kind == "credit":
            calls.append(("issue_goodwill_credit", {"user_id": c["user_id"], "amount": self.rng.choice([10, 15, 25, 40]),
                                                    "reason": "late delivery"}))
            self.conversation(t, calls, self.anyone_review)
        else:
            n = self.rng.choice((3, 3, 4, 5))
            tool = self.rng.choice(["return_delivered_order_items", "exchange_delivered_order_items",
                                    "modify_pending_order_items"])
            args = {"order_id": c["order"], "item_ids": self.items(n)}
            if tool != "return_delivered_order_items":
                args["new_item_ids"] = self.items(n)
            args["payment_method_id"] = c["gift"]
            calls.append((tool, args))
            self.conversation(t, calls, self.supervisor_review(
                "Five changes in one order from a new account: transfer the customer to a human agent.",
                ({"payment_method_id": c["card"]}, "The gift card balance does not cover the difference; charge the card.")))

    def history(self) -> None:
        """Customers arrive all day, fewer at night (UTC hours 6 to 20 are the day)."""
        t = 0.0
        while True:
            hour = (self.start + timedelta(seconds=t)).hour
            t += self.rng.expovariate(1 / (13 * MINUTE if 6 <= hour < 20 else 70 * MINUTE))
            if t > self.span - 45 * MINUTE:
                break
            self.scenario(t, latest_big=t < self.span - 4.2 * HOUR)  # a supervisors' ask ends (at most 4 h) before now
        self.waiting()

    def waiting(self) -> None:
        """The requests still waiting now: what the queue and the request page show."""
        end = self.span
        c = self.customer()
        old, new = self.items(3), self.items(3)

        def edited(t: float, request: int, agent: str) -> None:
            self.shown["request"] = request
            blue = self.items(1)[0]
            self.at(t + 52 * MINUTE, lambda: self.edit(request, "sup-2", {"new_item_ids": [new[0], blue, new[2]]},
                                                       f"The customer wants the blue one ({blue}), same price."))
        self.conversation(end - 2.7 * HOUR, [*self.lookups(c), ("exchange_delivered_order_items", {
            "order_id": c["order"], "item_ids": old, "new_item_ids": new, "payment_method_id": c["gift"]})], edited)

        c = self.customer()
        self.conversation(end - 75 * MINUTE, [*self.lookups(c), ("return_delivered_order_items", {
            "order_id": c["order"], "item_ids": self.items(4), "payment_method_id": c["paypal"]})],
            lambda t, r, a: self.at(t + 31 * MINUTE, lambda: self.approve(r, "sup-3")))
        c = self.customer()
        self.conversation(end - 26 * MINUTE, [*self.lookups(c), ("modify_pending_order_items", {
            "order_id": c["order"], "item_ids": self.items(3), "new_item_ids": self.items(3),
            "payment_method_id": c["card"]})], lambda t, r, a: None)
        for minutes, amount in ((38, 25), (3, 40)):
            c = self.customer()
            self.conversation(end - minutes * MINUTE, [("get_user_details", {"user_id": c["user_id"]}), (
                "issue_goodwill_credit", {"user_id": c["user_id"], "amount": amount,
                                          "reason": "the parcel arrived 6 days late"})], lambda t, r, a: None)
        c = self.customer()
        self.conversation(end - 14 * MINUTE, [*self.lookups(c), ("cancel_pending_order", {
            "order_id": c["order"], "reason": "no longer needed"})], lambda t, r, a: None)
        c = self.customer()
        self.conversation(end - 6 * MINUTE, [*self.lookups(c), ("modify_pending_order_address", {
            "order_id": c["order"], **self.address(c)})], lambda t, r, a: None)


# --- serving and photographing ----------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def photograph(demo: Demo, out: Path) -> None:
    import uvicorn
    from playwright.sync_api import sync_playwright

    from service.app import create_app
    from service.core import Service

    service = Service(policy=POLICY, ledger=demo.ledger_path, roster=demo.roster_path, key=demo.key_path)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = uvicorn.Server(uvicorn.Config(create_app(service), host="127.0.0.1", port=port, log_level="warning",
                                           access_log=False, lifespan="on"))
    thread = threading.Thread(target=server.run, name="uvicorn-screenshots", daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise SystemExit("uvicorn did not start")
        time.sleep(0.05)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
            page.set_default_timeout(15_000)
            page.goto(url + "/inbox")
            page.fill("#token", demo.tokens["sup-1"])
            page.keyboard.press("Enter")
            page.wait_for_url(url + "/inbox")
            page.locator("tr.row").first.wait_for()
            page.screenshot(path=str(out / "inbox-queue.png"), full_page=True)
            page.goto(f"{url}/inbox/requests/{demo.shown['request']}")
            page.locator("form.edit").wait_for()
            page.screenshot(path=str(out / "inbox-request.png"), full_page=True)
            page.goto(url + "/inbox/dashboard")
            page.locator("svg.chart").first.wait_for()
            page.screenshot(path=str(out / "inbox-dashboard.png"), full_page=True)
            browser.close()
    finally:
        server.should_exit = True
        thread.join(timeout=20)


def verify(demo: Demo) -> None:
    done = subprocess.run([sys.executable, "-c", "from cli.main import main; main()", "ledger", "verify",
                           str(demo.ledger_path), "--roster", str(demo.roster_path)], capture_output=True, text=True,
                          check=False, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    print(done.stdout.strip() or done.stderr.strip())
    if done.returncode != 0:
        raise SystemExit(f"the demo ledger does not verify (exit {done.returncode})")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=HERE, help="where the PNGs go (default: %(default)s)")
    parser.add_argument("--keep", type=Path, help="keep the demo ledger, roster and key in this new folder")
    parser.add_argument("--seed", type=int, default=11, help="the history's random seed (default: %(default)s)")
    options = parser.parse_args(argv)
    if options.keep is not None and options.keep.exists() and any(options.keep.iterdir()):
        parser.error(f"--keep {options.keep}: give a new or empty folder (the demo writes a new ledger)")
    folder = options.keep or Path(tempfile.mkdtemp(prefix="countersign-demo-"))
    folder.mkdir(parents=True, exist_ok=True)
    try:
        demo = Demo(folder, options.seed, utc_now() - timedelta(minutes=1))
        demo.history()
        demo.play()
        print(f"demo ledger: {demo.events} events, {len(demo.refused)} steps refused "
              f"(decisions after a deadline)")
        verify(demo)
        options.out.mkdir(parents=True, exist_ok=True)
        photograph(demo, options.out)
        for name in ("inbox-queue.png", "inbox-request.png", "inbox-dashboard.png"):
            print(options.out / name)
    finally:
        if options.keep is None:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
