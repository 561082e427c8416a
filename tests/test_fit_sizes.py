"""kvkb.fit.sizes: the SIZE and token-count forms users paste."""

import pytest

from kvkb.fit.sizes import SizeError, format_gib, human_bytes, parse_size, parse_tokens


@pytest.mark.parametrize("text,expected", [
    ("24GiB", 24 * 2**30),
    ("24 GiB", 24 * 2**30),
    ("80GB", 80 * 10**9),
    ("512MiB", 512 * 2**20),
    ("512MB", 512 * 10**6),
    ("1500000000", 1_500_000_000),
    ("1500000000B", 1_500_000_000),
    ("2G", 2 * 2**30),  # vLLM: uppercase = binary
    ("2g", 2 * 10**9),  # vLLM: lowercase = decimal
    ("8K", 8192),
    ("23.99GiB", int(23.99 * 2**30)),  # vLLM prints memory this way
    ("0.5gib", 2**29),
    ("1TiB", 2**40),
])
def test_parse_size(text, expected):
    assert parse_size(text) == expected


def test_decimal_size_is_exact_not_float_rounded():
    # 12.34 GiB = 12.34 * 2**30 exactly floored; float multiply could be off by one
    assert parse_size("12.34GiB") == (1234 * 2**30) // 100


@pytest.mark.parametrize("bad", ["", "GiB", "24 gibs", "-5GiB", "0", "1e9", "24 G B", "abc"])
def test_parse_size_rejects(bad):
    with pytest.raises(SizeError) as e:
        parse_size(bad)
    assert repr(bad) in str(e.value) or "more than 0" in str(e.value)


@pytest.mark.parametrize("text,expected", [("32768", 32768), ("32k", 32000), ("32K", 32768), ("128K", 131072),
                                           ("1M", 2**20)])
def test_parse_tokens_matches_vllm_human_readable_int(text, expected):
    assert parse_tokens(text) == expected


def test_parse_tokens_rejects_zero():
    with pytest.raises(SizeError):
        parse_tokens("0")


def test_format_gib_is_vllms_round_2():
    assert format_gib(1_019_215_872) == "0.95"
    assert format_gib(2_000_000) == "0.0"
    assert format_gib(16 * 2**30) == "16.0"


def test_human_bytes():
    assert human_bytes(512) == "512 B"
    assert human_bytes(57344) == "56.00 KiB"
    assert human_bytes(3 * 2**30 // 2) == "1.50 GiB"
