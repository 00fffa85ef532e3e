"""Start tests/e2e/scripted_server.py in its own process and crawl it."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.servers import prioritise


@dataclass
class Scripted:
    bases: list[str]
    log_path: Path
    process: subprocess.Popen[str]

    def log(self) -> list[dict]:
        return [json.loads(line) for line in self.log_path.read_text().splitlines() if line]

    def paths(self, host: int = 0) -> list[str]:
        netloc = self.bases[host].removeprefix("http://")
        return [e["path"] for e in self.log() if e["host"] == netloc]

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(10)


def start_scripted(tmp: Path, script: dict) -> Scripted:
    script_path = tmp / "script.json"
    script_path.write_text(json.dumps(script))
    log_path = tmp / "scripted-access.jsonl"
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.e2e.scripted_server", str(script_path),
         "--access-log", str(log_path)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    prioritise(process)
    assert process.stdout is not None
    bases = []
    for line in process.stdout:
        if line.strip() == "ready":
            return Scripted(bases, log_path, process)
        bases.append(line.strip())
    raise RuntimeError("scripted server did not start")


def page(body: str = "", status: int = 200, **headers: str) -> dict:
    return {"status": status, "body": body, "headers": headers}
