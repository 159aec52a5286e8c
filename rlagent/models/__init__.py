"""The shared vocabulary: state, action, finding and report models.

Imported by every layer (tools, agents, graph, CLI); imports none of them.
"""
