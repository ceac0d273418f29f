"""Collection rules for the bookshelf use-case.

The stack's products (`stacks/*/app`, `upstream`, `loadgen`) are not harness code: the app's
own suite runs in its workspace with its own `pytest.ini` (the CI gate does that, and
`tests/test_app_suite.py` checks it), so the harness session must not collect it. Nor
the scenarios' hidden CI tests (`scenarios/*/verify/ci/`): the gate runs them in a copy
of the app's tree.
"""

collect_ignore_glob = [
    "stacks/*",
    "scenarios/*/verify/ci/*",
    "scenarios/*/verify/fail_to_pass/*",
    "scenarios/*/verify/pass_to_pass/*",
]
