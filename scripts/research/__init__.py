"""The research reports and replays behind docs/results/ (not a user's commands: those are in scripts/ and the
package's console commands); importable as ``scripts.research.NAME`` from the repository root (for the tests)."""
