"""countersign in the shape each agent framework already uses (issue 12).

    adapters.backend      where calls are decided: a local Gate or the approval service
                          (LocalBackend, ServiceBackend, AsyncBackend, connect())
    adapters.langchain    LangChain's create_agent (CountersignMiddleware) and LangGraph nodes
                          (countersign_call): docs/adapters/langchain.md
    adapters.mcp_proxy    an MCP gateway in front of any MCP server (`countersign mcp-proxy`;
                          the `mcp` extra)
    adapters.mcp_names    what that gateway takes from its operator only: the server's name, a
                          loopback listener, the server's environment (no SDK import)
    adapters.claude_agent_sdk  the Claude Agent SDK: can_use_tool and the Pre/Post hooks
                          (countersign_options): docs/adapters/claude-agent-sdk.md
    adapters.openai_agents the OpenAI Agents SDK: gate_tools, resolve, run_gated
                          (docs/adapters/openai-agents.md)

One module per framework; each imports its framework only inside itself, and the framework is an
optional extra (`pip install 'countersign[langchain]'`, ...). This package sits at the top of the
layers, beside the CLI: it uses the library (dsl, ledger) and the service's HTTP API, and nothing
below imports it.
"""
