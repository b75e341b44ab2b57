//! Profile mode: trace sink, call-site identity, page-protection guard.
