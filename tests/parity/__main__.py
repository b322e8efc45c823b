"""``python -m tests.parity --pods 5000 [--seed N]`` (``make parity N=5000``): ask
kube-scheduler and metricsched about N random pending pods, print a summary and, for each
kind of disagreement, a minimal reproduction as YAML. Exits 1 on any disagreement."""

from __future__ import annotations

import argparse
import sys
import time

from tests.parity import extras, oracle


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.parity", description=__doc__)
    parser.add_argument("--pods", type=int, default=5000, help="pending pods to ask about")
    parser.add_argument("--seed", type=int, default=1, help="scenario seed")
    parser.add_argument("--no-shrink", action="store_true", help="print reproductions as found")
    parser.add_argument(
        "--without-postfilter",
        dest="postfilter",
        action="store_false",
        help="compare the FitError text only, without the PostFilter (preemption) suffix",
    )
    parser.add_argument(
        "--extras",
        default="",
        help="the generator's extras, comma-separated (nominated, declared_features, "
        "dra_extended_resources), or none; default: those of the oracle's version",
    )
    args = parser.parse_args(argv)

    binary = oracle.harness_binary()
    if not binary.exists():
        print(f"{binary} is missing: run `make tools`", file=sys.stderr)
        return 2
    started = time.monotonic()
    with oracle.Harness(binary, postfilter=args.postfilter) as harness:
        options = extras.Options.parse(args.extras) if args.extras else None
        report = oracle.run(pods=args.pods, seed=args.seed, harness=harness, options=options)
        elapsed = time.monotonic() - started
        for index, disagreement in report.disagreements:
            print(
                f"scenario {args.seed}/{index} {disagreement.kind} {disagreement.pod}: "
                f"{disagreement.detail}"
            )
        for kind, scenario in sorted(report.first_of_kind.items()):
            print(f"--- # minimal reproduction of a {kind} disagreement")
            if args.no_shrink:
                print(oracle.reproduction(scenario, harness))
            else:
                print(oracle.shrunk_reproduction(scenario, kind, harness))
    print(report.coverage_summary())
    print(report.scores_summary())
    if report.by_class:
        print("disagreements by kind and plugin:")
        print("\n".join(report.classes_summary()))
    print(
        f"kube-scheduler {harness.version}: {report.summary()} (seed {args.seed}, {elapsed:.1f}s)"
    )
    return 1 if report.disagreements else 0


if __name__ == "__main__":
    sys.exit(main())
