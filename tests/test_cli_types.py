"""The CLI's integer option types: bounds and non-integers are usage errors naming the option."""

import pytest

from harness.cli import build_parser


@pytest.mark.parametrize(
    "argv, message",
    [
        (["profile", "--warmup", "-1", "x"], "argument --warmup: must be at least 0, got -1"),
        (["profile", "--iters", "0", "x"], "argument --iters: must be at least 1, got 0"),
        (["profile", "--iters", "2.5", "x"], "argument --iters: not an integer: '2.5'"),
    ],
)
def test_integer_options_refuse_out_of_range_and_non_integers(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(argv)
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_integer_options_accept_their_bounds():
    """Negative control: the smallest allowed values parse."""
    args = build_parser().parse_args(["profile", "--warmup", "0", "--iters", "1", "x"])
    assert (args.warmup, args.iters) == (0, 1)
