"""The crawl processes' garbage-collector settings (trawler/gcpolicy.py).

Each check runs in a child process: the settings are process-wide."""

from __future__ import annotations

import functools
import subprocess
import sys
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from trawler.gcpolicy import FULL_EVERY, SWITCH_INTERVAL_S, YOUNG_EVERY


def _python(code: str, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_tune_freezes_start_up_objects_and_makes_collections_rare() -> None:
    out = _python(
        "import gc\n"
        "from trawler import gcpolicy\n"
        "before = gc.get_threshold()\n"
        "gcpolicy.tune_for_crawling()\n"
        "frozen = gc.get_freeze_count()\n"
        "gcpolicy.tune_for_crawling()  # a second call changes nothing\n"
        "print(before, gc.get_threshold(), frozen > 0, gc.get_freeze_count() == frozen)\n"
    )
    assert out == f"(700, 10, 10) ({YOUNG_EVERY}, 10, {FULL_EVERY}) True True"
    assert YOUNG_EVERY > 700


def test_tune_hands_the_gil_back_sooner() -> None:
    out = _python(
        "import sys\n"
        "from trawler import gcpolicy\n"
        "before = sys.getswitchinterval()\n"
        "gcpolicy.tune_for_crawling()\n"
        "print(before, sys.getswitchinterval())\n"
    )
    assert out == f"0.005 {SWITCH_INTERVAL_S}"


def test_trawler_crawl_runs_with_the_tuned_collector(tmp_path: Path) -> None:
    """The real `trawler crawl` (one page, served on loopback) leaves the
    process with the crawl settings."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "index.html").write_text("<html><body><p>one page</p></body></html>")
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(site))
    handler.log_message = lambda *args: None  # type: ignore[method-assign]
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    code = (
        "import atexit, gc, sys\n"
        "atexit.register(lambda: print('gc', gc.get_threshold()[2], gc.get_freeze_count() > 0,"
        " sys.getswitchinterval()))\n"
        "from trawler.cli import main\n"
        "sys.argv = ['trawler', *sys.argv[1:]]\n"
        "main()\n"
    )
    url = f"http://127.0.0.1:{server.server_address[1]}/index.html"
    try:
        out = _python(code, "crawl", url, "--data", str(tmp_path / "d"), "--allow-private", "-q")
    finally:
        server.shutdown()
    assert out.splitlines()[-1] == f"gc {FULL_EVERY} True {SWITCH_INTERVAL_S}"
