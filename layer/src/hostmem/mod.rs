//! Host memory below both modes (issue 25): what profile's host-access watch and enforce's
//! runtime guard share, written once — the memfd double mapping ([`memfd`]), importing it into
//! Vulkan ([`import`], or the driver's memory exported as an fd, [`export`]: the extension, the alignment; the create-info patches for buffers and
//! images live with the double mapping), which way a page fault went ([`fault`]), and installing and chaining the SIGSEGV handlers
//! ([`signal`]), and the state byte a handler and normal code share ([`slot_state`]).
//! Nothing here knows about traces, plans or either mode.

pub mod export;
pub mod fault;
pub mod import;
pub mod memfd;
pub mod signal;
pub mod slot_state;
