//! Extrapolation (issue 22): whether a group may be applied to behaviour no profile observed —
//! `context=program` under an argument list no profile saw.
//!
//! Enforce then meets host accesses the trace never showed. Only two kinds of group go along:
//!
//! - every hazard it could meet unseen is a host *write* to a staging member during GPU work,
//!   which the runtime guard catches (split copy-on-write, merged at the next elided upload):
//!   an upload-only member whose device buffer the GPU writes only through the group's own
//!   (elided) copies, so a host read of the member sees exactly what the program's separate
//!   staging buffer held;
//! - or the hazard cannot occur in a correct program: a download into a staging buffer created
//!   fresh for it and destroyed after it (its bytes are undefined until the download completes,
//!   so no correct program reads them during the GPU work).
//!
//! A persistent readback staging buffer — one that holds a defined earlier result while the GPU
//! works — is never extrapolated: a host read of it during GPU work (Kompute's `evalAsync`, a
//! program logging an intermediate result) would see the new bytes, and nothing can make that
//! right after the fact.

use crate::model::{BufId, Model, OpKind};
use crate::pairing::{self, Candidate, Way};

/// `Ok` when the group of device buffer `d` and `members` may be applied to behaviour no profile
/// observed; else why not, in one sentence.
pub fn check(m: &Model, d: BufId, members: &[&Candidate]) -> Result<(), String> {
    let staging: Vec<BufId> = members.iter().map(|c| c.staging).collect();
    for c in members {
        let down = c.links.iter().any(|l| l.way == Way::Down);
        let up = c.links.iter().any(|l| l.way == Way::Up);
        let name = format!("staging buffer #{}", m.buffers[c.staging].number);
        if down && !(pairing::is_one_time(m, c) && !up) {
            return Err(format!(
                "{name} holds an earlier result while the GPU works (a persistent readback buffer): a host read of it during GPU work, in a run no profile saw, would see the new bytes"
            ));
        }
    }
    // Upload-only members: the device buffer's bytes are the members' own unless the GPU
    // writes it otherwise. (A fresh download's bytes are undefined until it completes: the GPU
    // may write its device buffer as it likes.)
    let uploads = members
        .iter()
        .any(|c| c.links.iter().all(|l| l.way == Way::Up));
    if !uploads {
        return Ok(());
    }
    for (s, _) in m.submissions.iter().enumerate() {
        for op in m.ops(s) {
            let own_copy = matches!(&op.kind, OpKind::Copy { src, dst, .. } if *dst == d && staging.contains(src));
            if own_copy {
                continue;
            }
            if op.touches().iter().any(|t| t.0 == d && t.4) {
                return Err(format!(
                    "device buffer #{} is written on the GPU ({}) while its staging buffers share its bytes: a host read of them during GPU work, in a run no profile saw, would see the GPU's bytes",
                    m.buffers[d].number,
                    op.name()
                ));
            }
        }
    }
    Ok(())
}
