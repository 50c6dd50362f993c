//! Agenra: a verified authorization layer for LLM agents.
