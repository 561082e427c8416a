"""kvkb.entry: the model accepts real entries and rejects each kind of malformed one."""

import copy
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from kvkb.entry import Entry, FixStatus, check_versions

BASELINE = Path(__file__).parent / "data" / "broken-entries" / "ok-baseline.yaml"


@pytest.fixture
def data():
    return yaml.safe_load(BASELINE.read_text())


def _errors(data):
    with pytest.raises(ValidationError) as info:
        Entry.model_validate(data)
    return [(tuple(e["loc"]), e["type"]) for e in info.value.errors()]


def test_baseline_validates_and_exposes_fixes(data):
    entry = Entry.model_validate(data)
    assert entry.top_fix.id == "lower-max-model-len"
    assert [f.id for f in entry.all_fixes] == ["lower-max-model-len", "max-seq-len-kwarg"]
    assert entry.ineffective[0].status is FixStatus.ineffective
    assert entry.signatures[0].placeholders == ["max_model_len", "kv_tokens"]


def test_unknown_keys_are_errors_at_every_level(data):
    data["causes"][0]["fixes"][0]["clii"] = "x"
    data["fixes_cli"] = "y"
    assert set(_errors(data)) == {(("causes", 0, "fixes", 0, "clii"), "extra_forbidden"), (("fixes_cli",), "extra_forbidden")}


def test_fix_needs_a_form(data):
    del data["causes"][0]["fixes"][0]["cli"]
    assert _errors(data) == [(("causes", 0, "fixes", 0), "value_error")]


def test_signature_needs_exception_or_level(data):
    data["signatures"][0]["exception"] = None
    assert _errors(data) == [(("signatures", 0), "value_error")]
    data["signatures"][0]["level"] = "WARNING"
    Entry.model_validate(data)


def test_only_a_warning_or_info_line_can_be_advisory(data):
    # an advisory line is one healthy runs print too; an exception or an ERROR line is a failure
    data["signatures"][0]["advisory"] = True
    assert data["signatures"][0]["exception"]
    assert _errors(data) == [(("signatures", 0), "value_error")]
    data["signatures"][0]["exception"], data["signatures"][0]["level"] = None, "ERROR"
    assert _errors(data) == [(("signatures", 0), "value_error")]
    data["signatures"][0]["level"] = "WARNING"
    Entry.model_validate(data)


def test_reference_needs_url_or_source(data):
    del data["references"][0]["source"]
    assert _errors(data) == [(("references", 0), "value_error")]


def test_ineffective_advice_cannot_claim_another_status(data):
    data["ineffective"][0]["status"] = "verified"
    assert _errors(data) == [(("ineffective", 0, "status"), "value_error")]


@pytest.mark.parametrize("field", ["meaning", "summary", "title"])
def test_blank_text_is_rejected(data, field):
    data[field] = " " * 12
    assert _errors(data) == [((field,), "string_pattern_mismatch")]


@pytest.mark.parametrize("bad_id", ["Has-Caps", "double--hyphen", "-lead", "ab", "x" * 65, "under_score"])
def test_entry_ids_are_kebab_case(data, bad_id):
    data["id"] = bad_id
    assert _errors(data)[0][0] == ("id",)


def test_reference_versions_are_validated_too(data):
    data["references"][0]["versions"] = ">=0.9,<0.4"
    assert _errors(data) == [(("references", 0, "versions"), "value_error")]


def test_model_is_frozen(data):
    entry = Entry.model_validate(data)
    with pytest.raises(ValidationError):
        entry.id = "other"


@pytest.mark.parametrize("spec", [">=0.4.1", ">=0.9.1,<=0.21.0", "<0.4.1", "==0.8.*", "~=0.8.1", "!=0.5.0", ">0.1,<0.4.1", ">=0.6.6.post1"])
def test_valid_version_ranges(spec):
    assert check_versions(spec) == spec


@pytest.mark.parametrize(
    "spec, why",
    [("", "empty"), ("0.9.1", "Invalid specifier"), (">=", "Invalid specifier"), (">=0.22,<=0.9", "no release"),
     ("<0.4,>0.4", "no release"), ("==0.5,==0.6", "no release")],
)
def test_invalid_version_ranges(spec, why):
    with pytest.raises(ValueError, match=why):
        check_versions(spec)


def test_validation_does_not_mutate_input(data):
    before = copy.deepcopy(data)
    Entry.model_validate(data)
    assert data == before


def test_a_cause_sign_is_a_text_long_enough_to_look_for(data):
    data["causes"][0]["signs"] = ["OOMKilled", "--swap-space"]
    assert Entry.model_validate(data).causes[0].signs == ["OOMKilled", "--swap-space"]
    data["causes"][0]["signs"] = ["oom"]  # found in every other log: not a sign of one cause
    assert _errors(data) == [(("causes", 0, "signs", 0), "string_too_short")]
