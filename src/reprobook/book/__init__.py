"""The book machinery: chapters and their sidecars, the catalog, the runner and its executor, the
table of contents, the dashboard, the book build and the ``reprobook`` command.

Nothing here is imported by a chapter's computation; the top of ``reprobook`` keeps what chapters
use (ledger, criteria, intervals, glue, seeding, devices, plotting, widgets).
"""
