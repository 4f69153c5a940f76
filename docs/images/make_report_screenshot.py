"""The approval report's documentation screenshot (docs/images/report.png, shown in docs/report.md).

    .venv/bin/python docs/images/make_report_screenshot.py                  # rewrites docs/images/report.png
    .venv/bin/python docs/images/make_report_screenshot.py --out /tmp/shots --keep /tmp/demo

How: the web inbox's demo history (make_screenshots.Demo: five days of a retail support desk under
samples/retail.policy, replayed through the Gate with a manual clock; desk-1 sometimes approves
within seconds, supervisors take hours, some asks are edited, rejected or left to expire), with
drift added: from the third day on the agent gets payment methods and zip codes wrong more
often, so the desk edits more of its asks (the edit rate's chart climbs). The history ends at a fixed time, so the same seed
gives the same ledger. Then `countersign ledger report` (the real command, in a process of its
own) writes the page, and Playwright driving Debian's Chromium (/usr/bin/chromium) photographs
all of it, 940 pixels wide, with every request but the page's own file refused (none is made).
`--keep DIR` (a new or empty folder) leaves the ledger and the page there.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from make_screenshots import CHROMIUM, CHROMIUM_ARGS, DAYS, REPO, Demo  # noqa: E402 -- after the path

END = datetime(2026, 12, 4, 18, 0, tzinfo=timezone.utc)
"""The history's end (a Friday evening, UTC)."""


class DriftingDemo(Demo):
    """The demo's history, with the desk editing more of the agent's asks from the third day on
    (12 % of those it may edit at first, 60 % by the last day)."""

    def edit_odds(self, t: float) -> float:
        day = t / 86_400
        return 0.12 if day < 2 else min(0.60, 0.12 + 0.16 * (day - 2))


def report(ledger: Path, page: Path) -> None:
    done = subprocess.run([sys.executable, "-c", "from cli.main import main; main()", "ledger", "report", str(ledger),
                           "--out", str(page)], capture_output=True, text=True, check=False, cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    print(done.stdout.strip(), done.stderr.strip())
    if done.returncode != 0:
        raise SystemExit(f"ledger report failed (exit {done.returncode})")


def photograph(page_file: Path, png: Path) -> None:
    from playwright.sync_api import sync_playwright

    url = page_file.resolve().as_uri()
    refused: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_context(viewport={"width": 940, "height": 1000}).new_page()
        page.route("**/*", lambda route: route.continue_() if route.request.url == url
                   else (refused.append(route.request.url), route.abort()))
        page.goto(url)
        page.locator("svg.chart").last.wait_for()
        page.screenshot(path=str(png), full_page=True)
        browser.close()
    if refused:
        raise SystemExit(f"the page asked for {refused}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=HERE, help="where report.png goes (default: %(default)s)")
    parser.add_argument("--keep", type=Path, help="keep the demo ledger and the page in this new folder")
    parser.add_argument("--seed", type=int, default=11, help="the history's random seed (default: %(default)s)")
    options = parser.parse_args(argv)
    if options.keep is not None and options.keep.exists() and any(options.keep.iterdir()):
        parser.error(f"--keep {options.keep}: give a new or empty folder (the demo writes a new ledger)")
    folder = options.keep or Path(tempfile.mkdtemp(prefix="countersign-report-"))
    folder.mkdir(parents=True, exist_ok=True)
    try:
        demo = DriftingDemo(folder, options.seed, END)
        demo.history()
        demo.play()
        print(f"demo ledger: {demo.events} events over {DAYS} days")
        page = folder / "report.html"
        report(demo.ledger_path, page)
        options.out.mkdir(parents=True, exist_ok=True)
        photograph(page, options.out / "report.png")
        print(options.out / "report.png")
    finally:
        if options.keep is None:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
