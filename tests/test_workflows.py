"""GitHub Actions workflows: runners, triggers, and the label gate that keeps forks off the GPU box."""

from pathlib import Path

import pytest
import yaml

WORKFLOWS = Path(__file__).resolve().parent.parent / ".github" / "workflows"


def load(name: str) -> dict:
    data = yaml.safe_load((WORKFLOWS / name).read_text())
    # YAML 1.1 reads the key `on` as True
    data["on"] = data.pop(True, data.get("on"))
    return data


def steps_text(job: dict) -> str:
    return "\n".join(str(s.get("run", "")) + " " + str(s.get("uses", "")) for s in job["steps"])


@pytest.mark.parametrize("name", ["ci.yml", "gpu-reproductions.yml", "pages.yml", "atlas-drift.yml"])
def test_workflow_parses_with_jobs_and_steps(name):
    data = load(name)
    assert data["on"] and data["jobs"]
    for job in data["jobs"].values():
        assert job["runs-on"] and job["steps"]


def test_ci_runs_lint_tests_site_and_cpu_reproductions():
    data = load("ci.yml")
    assert {"push", "pull_request"} <= set(data["on"])
    assert data["permissions"] == {"contents": "read"}
    text = "\n".join(steps_text(j) for j in data["jobs"].values())
    for command in ("kvkb lint", "pytest", "mkdocs build --strict", "setup-cpu-venv.sh",
                    "kvkb verify --backend cpu"):
        assert command in text, command
    for job in data["jobs"].values():
        assert "self-hosted" not in str(job["runs-on"])  # forks' PRs only ever reach hosted runners


def test_gpu_workflow_runner_and_triggers():
    data = load("gpu-reproductions.yml")
    job = data["jobs"]["cuda"]
    assert job["runs-on"] == ["self-hosted", "linux", "gpu"]
    on = data["on"]
    assert on["push"]["branches"] == ["main"]
    assert on["schedule"][0]["cron"]
    assert "workflow_dispatch" in on
    assert "kvkb verify --backend cuda" in steps_text(job)
    assert "kvkb doctor" in steps_text(job)


def test_gpu_workflow_never_runs_unreviewed_fork_code():
    data = load("gpu-reproductions.yml")
    on = data["on"]
    assert "pull_request_target" not in on
    # only the `labeled` action: a new push to a PR needs a maintainer to label it again
    assert on["pull_request"]["types"] == ["labeled"]
    condition = " ".join(data["jobs"]["cuda"]["if"].split())
    assert "github.event_name != 'pull_request'" in condition
    assert "github.event.label.name == 'run-gpu'" in condition
    assert data["permissions"] == {"contents": "read"}
    checkout = next(s for s in data["jobs"]["cuda"]["steps"] if "checkout" in str(s.get("uses", "")))
    assert checkout["with"]["persist-credentials"] is False


def test_gpu_runs_never_overlap():
    assert load("gpu-reproductions.yml")["concurrency"]["cancel-in-progress"] is False


def test_pages_publishes_the_site_with_results():
    data = load("pages.yml")
    assert data["on"]["push"]["branches"] == ["main"]
    assert data["on"]["workflow_run"]["workflows"] == ["gpu-reproductions"]
    assert data["permissions"]["pages"] == "write" and data["permissions"]["id-token"] == "write"
    text = "\n".join(steps_text(j) for j in data["jobs"].values())
    assert "mkdocs build --strict" in text and "deploy-pages" in text
    assert "reproductions/results/cuda.json" in text


def test_atlas_drift_adds_new_releases_and_opens_an_issue():
    data = load("atlas-drift.yml")
    assert data["on"]["schedule"][0]["cron"] and "workflow_dispatch" in data["on"]
    # reads the repo, writes issues, nothing else
    assert data["permissions"] == {"contents": "read", "issues": "write"}
    job = data["jobs"]["drift"]
    text = steps_text(job)
    assert "kvkb atlas add --new --report drift.md" in text
    assert "gh issue create" in text and "--body-file" in text
    assert "self-hosted" not in str(job["runs-on"])
    opener = next(s for s in job["steps"] if "gh issue create" in str(s.get("run", "")))
    assert opener["env"]["GH_TOKEN"] == "${{ github.token }}"
    assert "hashFiles('drift.md')" in opener["if"]
