"""What a scenario's hidden tests use from the CI gate's judge: the types of its fixtures.

Hidden tests (`verify/ci/`, a patch scenario's `verify/fail_to_pass/` and
`verify/pass_to_pass/`) run in the judge's own pytest process, never beside the
submission; its fixtures (`service`, `serve`, `upstream`, `service_db`) are described in
`sreforge_deployer.gate._judge_plugin`. Imported only by that process (it loads pytest).
"""

from sreforge_deployer.gate._judge_plugin import MAX_RESPONSE_BYTES, Data, Serve
from sreforge_deployer.gate._judge_stub import Handler, StubUpstream, not_found

__all__ = ["MAX_RESPONSE_BYTES", "Data", "Handler", "Serve", "StubUpstream", "not_found"]
