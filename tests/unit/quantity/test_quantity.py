"""Kubernetes quantities: suffixes, exponents, rounding up, caps and garbage."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from metricsched.core import quantity

GI = 2**30


@pytest.mark.parametrize(
    ("text", "milli"),
    [
        ("100m", 100),
        ("0.1", 100),
        ("1", 1000),
        ("2.5", 2500),
        ("1.", 1000),
        (".5", 500),
        ("+1", 1000),
        ("0", 0),
        ("0m", 0),
        ("1k", 1_000_000),
        ("1e3", 1_000_000),
        ("1E3", 1_000_000),
        ("1e+3", 1_000_000),
        ("1e-3", 1),
        ("1.5e3", 1_500_000),
        ("250000u", 250),
        ("100000000n", 100),
    ],
)
def test_cpu_quantities_are_read_in_millicores(text, milli):
    assert quantity.parse_milli(text) == milli


@pytest.mark.parametrize(
    ("text", "units"),
    [
        ("1Ki", 1024),
        ("1Mi", 2**20),
        ("1Gi", GI),
        ("1.5Gi", 3 * GI // 2),
        ("1Ti", 2**40),
        ("1Pi", 2**50),
        ("1Ei", 2**60),
        ("1k", 1000),
        ("1M", 10**6),
        ("1G", 10**9),
        ("1T", 10**12),
        ("1P", 10**15),
        ("1E", 10**18),
        ("128974848", 128974848),
        ("129e6", 129_000_000),
        ("123Mi", 123 * 2**20),
    ],
)
def test_byte_quantities_are_read_in_whole_units(text, units):
    assert quantity.parse_int(text) == units


def test_fractions_below_a_millicore_round_up_to_one():
    assert quantity.parse_milli("0.5m") == 1
    assert quantity.parse_milli("1n") == 1


def test_fractional_bytes_round_up_to_the_next_byte():
    assert quantity.parse_int("0.5") == 1
    assert quantity.parse_int("1.1") == 2
    assert quantity.parse_int("1.5Ki") == 1536
    assert quantity.parse_int("0.3Ki") == 308  # 307.2 rounds up


def test_values_are_exact_where_floats_would_drift():
    assert quantity.parse_milli("0.3") == 300  # 0.1 + 0.2 != 0.3 in binary floats
    assert quantity.parse_int("0.1Gi") == 107374183  # ceil(107374182.4)


def test_tiny_values_keep_a_minimum_of_one_nano_unit():
    assert quantity.parse_nano("1e-30") == 1
    assert quantity.parse_nano("1e-1000000000") == 1


def test_huge_values_are_capped_at_the_int64_maximum():
    assert quantity.parse_int("1e100") == 2**63 - 1
    assert quantity.parse_int("1e1000000000") == 2**63 - 1
    assert quantity.parse_int("16Ei") == 2**63 - 1
    assert quantity.parse_milli("1E") == 2**63 - 1  # 1e21 milli does not fit


def test_negative_quantities_round_away_from_zero():
    assert quantity.parse_int("-1") == -1
    assert quantity.parse_int("-1.5") == -2
    assert quantity.parse_milli("-0.5m") == -1


def test_surrounding_whitespace_is_ignored_like_the_api_servers_decoder():
    assert quantity.parse_int(" 2Gi\n") == 2 * GI


def test_json_numbers_are_read_as_their_decimal_text():
    assert quantity.parse_milli(2) == 2000
    assert quantity.parse_milli(0.25) == 250
    assert quantity.parse_milli(1e-05) == 1


@pytest.mark.parametrize(
    "garbage",
    [
        "",
        ".",
        "+",
        "-",
        "abc",
        "1K",  # kilo is lowercase
        "1ki",
        "1mi",
        "1e",
        "1e3.5",
        "1.2.3",
        "1 Gi",
        "0x10",
        "0abc",
        "1_000",
        "\u0661",  # ARABIC-INDIC DIGIT ONE: Go accepts only ASCII digits
    ],
)
def test_garbage_is_a_quantity_error(garbage):
    with pytest.raises(quantity.QuantityError):
        quantity.parse_nano(garbage)


@pytest.mark.parametrize("value", [None, True, False, float("nan"), float("inf"), [1], {"a": 1}])
def test_values_of_the_wrong_type_are_a_quantity_error(value):
    with pytest.raises(quantity.QuantityError):
        quantity.parse_nano(value)


def test_quantity_error_is_a_value_error_naming_the_input():
    with pytest.raises(ValueError, match="'12 apples'"):
        quantity.parse_int("12 apples")


def test_whole_millicores_are_formatted_as_cores():
    assert quantity.format_milli(2000) == "2"
    assert quantity.format_milli(1500) == "1500m"
    assert quantity.format_milli(0) == "0"


def test_bytes_are_formatted_with_the_largest_exact_binary_suffix():
    assert quantity.format_int(GI) == "1Gi"
    assert quantity.format_int(1536) == "1536"  # 1.5Ki is not a whole number of Ki
    assert quantity.format_int(3 * 2**19) == "1536Ki"
    assert quantity.format_int(1000) == "1000"
    assert quantity.format_int(0) == "0"


SUFFIX_FACTORS = {
    "": 1,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
}


@given(
    amount=st.integers(min_value=0, max_value=10**6), suffix=st.sampled_from(sorted(SUFFIX_FACTORS))
)
def test_integer_with_any_suffix_reads_back_exactly(amount, suffix):
    assert quantity.parse_int(f"{amount}{suffix}") == amount * SUFFIX_FACTORS[suffix]


@given(amount=st.integers(min_value=0, max_value=10**6), exponent=st.integers(0, 9))
def test_exponent_form_equals_the_plain_integer(amount, exponent):
    assert quantity.parse_int(f"{amount}e{exponent}") == amount * 10**exponent


@given(milli=st.integers(min_value=0, max_value=10**12))
def test_formatted_millicores_read_back_unchanged(milli):
    assert quantity.parse_milli(quantity.format_milli(milli)) == milli


@given(units=st.integers(min_value=0, max_value=2**62))
def test_formatted_bytes_read_back_unchanged(units):
    assert quantity.parse_int(quantity.format_int(units)) == units


@given(whole=st.integers(0, 10**6), thousandths=st.integers(0, 999))
def test_decimal_cores_and_millicores_agree(whole, thousandths):
    decimal = f"{whole}.{thousandths:03d}"
    assert quantity.parse_milli(decimal) == quantity.parse_milli(f"{whole * 1000 + thousandths}m")


@given(nanos=st.integers(min_value=0, max_value=10**20))
def test_rounding_up_never_loses_a_requested_amount(nanos):
    text = f"{nanos}n"
    assert quantity.parse_milli(text) * 10**6 >= nanos
    assert quantity.parse_milli(text) * 10**6 < nanos + 10**6
