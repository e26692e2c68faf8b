#!/usr/bin/env python3
"""Per-file passed/failed/skipped counts from a pytest JUnit XML report."""
import collections
import sys
import xml.etree.ElementTree as ET


def main(path):
    counts = collections.OrderedDict()
    for case in ET.parse(path).getroot().iter("testcase"):
        name = case.get("classname", "").split(".")[-1] or "?"
        c = counts.setdefault(name, collections.Counter())
        if case.find("skipped") is not None:
            c["skipped"] += 1
        elif case.find("failure") is not None or case.find("error") is not None:
            c["failed"] += 1
        else:
            c["passed"] += 1
    total = collections.Counter()
    print(f"{'file':<24} passed failed skipped")
    for name, c in counts.items():
        total.update(c)
        print(f"{name:<24} {c['passed']:>6} {c['failed']:>6} {c['skipped']:>7}")
    print(f"{'total':<24} {total['passed']:>6} {total['failed']:>6} {total['skipped']:>7}")


if __name__ == "__main__":
    main(sys.argv[1])
