"""A replay model server: a **test double** for the hosted model APIs (named as such).

The real agent CLIs run unchanged; only the model behind them is replaced. A test
writes the conversation the model would have (`Script`: text and tool calls per turn),
points the profile's `metadata.upstream` at `ReplayServer.url` (the runner's model proxy
forwards to it) and afterwards asserts what the agent sent (`ReplayServer.received`).

One server speaks every provider API a preset needs, routed by path:
OpenAI Chat Completions (`/v1/chat/completions`), OpenAI Responses (`/v1/responses`),
Anthropic Messages (`/v1/messages`) and Gemini (`/v1beta/models/<m>:generateContent`
and `:streamGenerateContent`), each streamed (SSE) when the request asks for it.
On `sys.path` through the root `conftest.py` (`import replay`).
"""

from ._script import Received, Script, ToolCall, Turn
from ._server import Flavor, ReplayServer, Reply

__all__ = ["Flavor", "Received", "ReplayServer", "Reply", "Script", "ToolCall", "Turn"]
