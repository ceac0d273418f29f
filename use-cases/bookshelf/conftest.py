"""Collection rules for the bookshelf use-case.

The stack's products (`stacks/*/app`, `upstream`, `loadgen`) are not harness code: the app's
own suite runs in its workspace with its own `pytest.ini` (the CI gate does that, and
`tests/test_app_suite.py` checks it), so the harness session must not collect it.
"""

collect_ignore_glob = ["stacks/*"]
