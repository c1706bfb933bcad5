//! The human text of every command's report ([`Report`]): one line per
//! fact, in the order people read them. The JSON form is each report's serde
//! form, written by [`super::output`]. The text of `list`, `log`, `find`,
//! `show` and `audit` follows a [`Layout`], decided once per command: piped,
//! it is the text as it always was; on a terminal, it fits its width, with
//! short digests when it is narrow or `--short` is given (`layout.rs`).

mod audit;
mod layout;
mod queries;
mod source;

use std::collections::BTreeMap;
use std::io::{self, Write};

pub use self::audit::AuditOutput;
pub use self::layout::{Fitted, Layout, Named};
use super::output::Report;
use crate::cmd::bundle::{ExportReport, Format, ImportReport};
use crate::cmd::checkout::CheckoutReport;
use crate::cmd::diff::{Change, DiffReport};
use crate::cmd::digest::DigestReport;
use crate::cmd::discard::DiscardReport;
use crate::cmd::exit_codes::ExitCodesReport;
use crate::cmd::gc::{GcReport, RmReport};
use crate::cmd::ingest::IngestReport;
use crate::cmd::mounts::MountsReport;
use crate::cmd::path::PathReport;
use crate::cmd::pull::PullReport;
use crate::cmd::push::PushReport;
use crate::cmd::recover::RecoverReport;
use crate::cmd::rules::RulesReport;
use crate::cmd::show::ManifestReport;
use crate::cmd::stage::{ReleaseReport, StageReport};
use crate::cmd::verify::{SourceReport, TreeReport, VerifyReport};
use crate::error::{counted, ErrorKind};
use crate::interrupt::Signal;
use crate::profile::ce::rules::LeftOut;
use crate::source::{SourceEntry, Via};
use crate::store::upkeep::verify::Severity;

/// A report's exit code: 1, the code of damage, when it found a problem
/// (for `find`, when it found nothing), else 0.
pub(super) fn found_problems(found: bool) -> u8 {
    if found {
        ErrorKind::Integrity.exit_code()
    } else {
        crate::error::kind::SUCCESS
    }
}

/// The source records an ingest kept, one line each: `source: git …`, or,
/// for a record a registry or bundle brought, with when and how.
fn sources(kept: &[SourceEntry], w: &mut dyn Write) -> io::Result<()> {
    for e in kept {
        match e.via {
            Via::Ingest => writeln!(w, "source: {}", source::record_line(&e.record))?,
            via => writeln!(
                w,
                "source ({} via {}): {}",
                e.at,
                via.as_str(),
                source::record_line(&e.record)
            )?,
        }
    }
    Ok(())
}

impl Report for IngestReport {
    fn human(&self, w: &mut dyn Write) -> io::Result<()> {
        let p = &self.provenance;
        let s = &self.ingest;
        writeln!(w, "{}", p.manifest_digest)?;
        writeln!(
            w,
            "{} {}: {}, {}; {}: {} ({}), {} reused",
            p.name,
            p.version,
            counted(p.file_count, "file", "files"),
            counted(p.total_bytes, "byte", "bytes"),
            if s.already_present {
                "already stored"
            } else {
                "stored"
            },
            counted(s.new_objects, "new object", "new objects"),
            counted(s.bytes_written, "byte", "bytes"),
            s.reused_objects
        )?;
        if !s.left_out.is_empty() {
            let count = |why| s.left_out.iter().filter(|e| e.reason == why).count();
            writeln!(
                w,
                "left out: {}, {}, {} (the reference's filters; `--json` lists them)",
                counted(
                    count(LeftOut::Secret),
                    "possible secret",
                    "possible secrets"
                ),
                counted(
                    count(LeftOut::ForbiddenPart),
                    "forbidden part",
                    "forbidden parts"
                ),
                counted(
                    count(LeftOut::OutsideAllowlist),
                    "entry outside the allowlist",
                    "entries outside the allowlist"
                ),
            )?;
        }
        for r in &s.repaired {
            let how = match r.repair {
                "mode" => "its mode was set back",
                _ => "its bytes were replaced by the source's",
            };
            writeln!(w, "repaired {}: it {}; {how}", r.object, r.was)?;
        }
        for a in &s.attestations {
            writeln!(w, "attestation {} (key {})", a.id, a.keyid)?;
        }
        sources(&s.sources, w)
    }
}

impl Report for DigestReport {
    fn human(&self, w: &mut dyn Write) -> io::Result<()> {
        writeln!(w, "{}", self.provenance.manifest_digest)
    }
}

impl Report for ManifestReport {
    fn human(&self, w: &mut dyn Write) -> io::Result<()> {
        w.write_all(&self.bytes)
    }
}

impl Report for CheckoutReport {
    fn human(&self, w: &mut dyn Write) -> io::Result<()> {
        writeln!(w, "{}", self.view)?;
        writeln!(
            w,
            "{}: {} linked, {} copied, {}",
            self.manifest_digest,
            self.built.linked,
            self.built.copied,
            counted(self.built.directories, "directory", "directories")
        )?;
        for (why, n) in &self.built.copy_reasons {
            writeln!(w, "  copied {n}: {why}")?;
        }
        Ok(())
    }
}

impl Report for crate::cmd::checkout::WritableReport {
    fn human(&self, w: &mut dyn Write) -> io::Result<()> {
        writeln!(w, "{}", self.path)?;
        writeln!(
            w,
            "{} ({}): {} reflinked, {} copied ({} bytes), {}, {}",
            self.manifest_digest,
            self.profile,
            self.written.reflinked,
            self.written.copied,
            self.written.bytes_copied,
            counted(self.written.directories, "directory", "directories"),
            counted(self.written.symlinks, "symlink", "symlinks"),
        )
    }
}

impl Report for crate::cmd::checkout::MaterializeReport {
    fn human(&self, w: &mut dyn Write) -> io::Result<()> {
        writeln!(w, "{}", self.clone.display())?;
        writeln!(
            w,
            "{}: {} replaced; {} reflinked, {} copied ({} bytes)",
            self.digest,
            counted(self.declarations.len(), "root", "roots"),
            self.written.reflinked,
            self.written.copied,
            self.written.bytes_copied,
        )
    }
}

impl Report for crate::cmd::key::GeneratedKey {
    fn human(&self, w: &mut dyn Write) -> io::Result<()> {
        writeln!(
            w,
            "private key: {} (mode 0600; keep it to yourself)",
            self.private_key.display()
        )?;
        writeln!(
            w,
            "public key:  {} (give it to whoever checks your signatures)",
            self.public_key.display()
        )?;
        writeln!(w, "key id:      {}", self.keyid)
    }
}

impl Report for crate::cmd::sign::SignReport {
    fn human(&self, w: &mut dyn Write) -> io::Result<()> {
        for m in &self.members {
            m.human(w)?;
        }
        let how = if self.new { "signed" } else { "already signed" };
        writeln!(
            w,
            "{how} {} with key {}: attestation {} ({})",
            self.manifest_digest, self.keyid, self.attestation, self.at
        )
    }
}

impl Report for crate::cmd::sign::AttestationsReport {
    fn human(&self, w: &mut dyn Write) -> io::Result<()> {
        if self.attestations.is_empty() {
            return writeln!(
                w,
                "{}: no attestation (`cestore sign` makes one)",
                self.manifest_digest
            );
        }
        writeln!(
            w,
            "{}: {} attestation(s)",
            self.manifest_digest,
            self.attestations.len()
        )?;
        for a in &self.attestations {
            let verdict = match &a.verified {
                None => String::new(),
                Some(v) if v.ok => "; vouches for it under a trusted key".to_string(),
                Some(v) => format!(
                    "; does not vouch for it: {}",
                    v.why.as_deref().unwrap_or("")
                ),
            };
            writeln!(
                w,
                "  {} key {} at {}: {} by {}{verdict}",
                a.id,
                a.keyid,
                a.at,
                a.subjects.join(", "),
                a.builder.as_deref().unwrap_or("an unknown stager")
            )?;
        }
        Ok(())
    }
}

impl Report for RmReport {
    fn human(&self, w: &mut dyn Write) -> io::Result<()> {
        writeln!(
            w,
            "forgot {}; `cestore gc` frees its objects",
            self.manifest_digest
        )?;
        for v in &self.views_forgotten {
            if self.shared_views.contains(v) {
                writeln!(
                    w,
                    "  shared view no longer recorded (`cestore gc` removes it): {v}"
                )?;
            } else {
                writeln!(w, "  view no longer recorded (left on disk): {v}")?;
            }
        }
        Ok(())
    }
}

impl Report for GcReport {
    fn exit_code(&self) -> u8 {
        if self.refused {
            ErrorKind::Conflict.exit_code()
        } else {
            crate::error::kind::SUCCESS
        }
    }

    fn human(&self, w: &mut dyn Write) -> io::Result<()> {
        for u in &self.unsafe_manifests {
            writeln!(w, "unsafe to sweep: {}: {}", u.path, u.detail)?;
        }
        if self.refused {
            writeln!(
                w,
                "refused to sweep while {}: nothing was removed. \
                 `cestore recover` mends what the catalogue still knows; \
                 `cestore gc --force` sweeps anyway, still keeping every object \
                 the damaged manifests name",
                counted(
                    self.unsafe_manifests.len(),
                    "manifest is damaged or missing",
                    "manifests are damaged or missing"
                )
            )?;
        }
        let verb = if self.dry_run || self.refused {
            "would remove"
        } else {
            "removed"
        };
        for o in &self.objects {
            writeln!(w, "{verb} object {o}")?;
        }
        for t in &self.temporary {
            writeln!(w, "{verb} temporary {t}")?;
        }
        for v in &self.shared_views {
            writeln!(w, "{verb} shared view {v}")?;
        }
        for v in &self.spares {
            writeln!(w, "{verb} the spare views {v}")?;
        }
        let forget = if self.dry_run || self.refused {
            "would forget"
        } else {
            "forgot"
        };
        for v in &self.stale_view_records {
            writeln!(w, "{forget} the record of the vanished view {v}")?;
        }
        for m in &self.manifests {
            writeln!(w, "{verb} unrecorded manifest {m}")?;
        }
        for r in &self.source_records {
            writeln!(w, "{verb} the orphan source records {r}")?;
        }
        for a in &self.attestations {
            writeln!(w, "{verb} the orphan attestations {a}")?;
        }
        writeln!(
            w,
            "{verb} {} ({}), {}, {}, {}; {forget} {}; kept {}",
            counted(self.objects.len(), "object", "objects"),
            counted(self.bytes_freed, "byte", "bytes"),
            counted(self.temporary.len(), "temporary entry", "temporary entries"),
            counted(
                self.manifests.len(),
                "unrecorded manifest",
                "unrecorded manifests"
            ),
            counted(self.shared_views.len(), "shared view", "shared views"),
            counted(
                self.stale_view_records.len(),
                "stale view record",
                "stale view records"
            ),
            counted(self.objects_kept, "object", "objects")
        )
    }
}

impl Report for DiscardReport {
    fn human(&self, w: &mut dyn Write) -> io::Result<()> {
        match (self.manifest_digest, self.removed) {
            (Some(d), true) if self.spare => writeln!(
                w,
                "kept {} ({d}) as a spare: moved whole into the store for the next \
                 checkout of its snapshot",
                self.view
            ),
            (Some(d), true) => writeln!(w, "removed {} ({d})", self.view),
            (Some(d), false) => writeln!(w, "forgot {} ({d}): already gone", self.view),
            (None, _) => writeln!(
                w,
                "nothing to discard at {}: no view is there or recorded (already gone)",
                self.view
            ),
        }
    }
}

impl Report for PathReport {
    fn human(&self, w: &mut dyn Write) -> io::Result<()> {
        writeln!(w, "{}", self.path.display())
    }
}

impl Report for StageReport {
    fn human(&self, w: &mut dyn Write) -> io::Result<()> {
        match (&self.provenance, &self.view) {
            (Some(p), Some(v)) => {
                writeln!(w, "{} {} {}", p.manifest_digest, p.name, p.version)?;
                writeln!(w, "view: {v}")?;
                if let Some(ingest) = &self.ingest {
                    sources(&ingest.sources, w)?;
                }
            }
            _ => writeln!(w, "no ce_* arm: nothing staged")?,
        }
        let runtime = &self.gitnexus_runtime;
        if let (Some(d), Some(v)) = (&runtime.manifest_digest, &runtime.view) {
            writeln!(w, "gitnexus runtime: {d} ({v})")?;
        }
        for a in &self.arms {
            writeln!(
                w,
                "{}: {}",
                a.arm,
                counted(a.mounts.len(), "mount", "mounts")
            )?;
            for m in &a.mounts {
                writeln!(w, "  {} -> {} (read-only)", m.source.display(), m.target)?;
            }
        }
        Ok(())
    }
}

impl Report for ReleaseReport {
    fn human(&self, w: &mut dyn Write) -> io::Result<()> {
        self.discard.human(w)?;
        if let Some(signal) = self.signal {
            writeln!(w, "stopped by {}", signal.name())?;
        }
        Ok(())
    }

    fn exit_code(&self) -> u8 {
        self.signal.map_or(0, Signal::exit_code)
    }
}

impl Report for VerifyReport {
    /// 1 for damage or inconsistency; leftovers for gc alone are no failure.
    fn exit_code(&self) -> u8 {
        found_problems(self.damage().next().is_some())
    }

    fn human(&self, w: &mut dyn Write) -> io::Result<()> {
        for r in &self.repaired {
            writeln!(w, "repaired: {r}")?;
        }
        for v in &self.stale_views {
            writeln!(
                w,
                "the view {} still links damaged bytes; renew it: {}",
                v.view, v.renew
            )?;
        }
        for p in self.damage() {
            writeln!(w, "{} ({:?}): {}: {}", p.kind, p.severity, p.path, p.detail)?;
            for s in &p.snapshots {
                writeln!(w, "  affects snapshot {s}")?;
            }
            for v in &p.views {
                writeln!(w, "  affects view {v}")?;
            }
        }
        let mut garbage: BTreeMap<&str, usize> = BTreeMap::new();
        for p in self
            .problems
            .iter()
            .filter(|p| p.severity == Severity::Garbage)
        {
            *garbage.entry(p.kind).or_default() += 1;
        }
        if !garbage.is_empty() {
            let kinds: Vec<String> = garbage
                .iter()
                .map(|(kind, n)| format!("{n} {kind}"))
                .collect();
            writeln!(
                w,
                "garbage for `cestore gc`: {} (`--json` lists them)",
                kinds.join(", ")
            )?;
        }
        let damaged = match self.damage().count() {
            0 => "no problems".to_string(),
            n => counted(n, "problem", "problems"),
        };
        let attestations = match (self.attestations_checked, self.attestations_verified) {
            (Some(n), Some(ok)) => format!(
                ", {} ({ok} signed by a key trusted)",
                counted(n, "attestation", "attestations")
            ),
            _ => String::new(),
        };
        writeln!(
            w,
            "verified {}, {} ({} re-hashed){attestations}: {damaged}",
            counted(self.snapshots_checked, "snapshot", "snapshots"),
            counted(self.objects_checked, "object", "objects"),
            counted(self.bytes_hashed, "byte", "bytes"),
        )
    }
}

impl Report for TreeReport {
    fn exit_code(&self) -> u8 {
        found_problems(!self.differences.is_empty())
    }

    fn human(&self, w: &mut dyn Write) -> io::Result<()> {
        for d in &self.differences {
            writeln!(w, "{d}")?;
        }
        if !self.differences.is_empty() {
            writeln!(
                w,
                "{} differs from {} in {}",
                self.tree,
                self.manifest_digest,
                counted(self.differences.len(), "way", "ways")
            )?;
        }
        Ok(())
    }
}

impl Report for SourceReport {
    /// 1, the code of damage, unless the snapshot re-derives from its commit.
    fn exit_code(&self) -> u8 {
        found_problems(!self.check.is_equal())
    }

    fn human(&self, w: &mut dyn Write) -> io::Result<()> {
        match source::check_line(&self.check) {
            None => writeln!(
                w,
                "{} re-derives from commit {} at {} of {}",
                self.manifest_digest,
                self.check.commit.as_deref().unwrap_or("-"),
                match self.check.path.as_deref() {
                    None | Some("") => "the root",
                    Some(p) => p,
                },
                self.repository
            ),
            Some(line) => writeln!(
                w,
                "{}: {}: {line}",
                self.manifest_digest,
                self.check.status.as_str()
            ),
        }
    }
}

impl Report for DiffReport {
    fn human(&self, w: &mut dyn Write) -> io::Result<()> {
        for c in &self.changes {
            match c {
                Change::Added { path, .. } => writeln!(w, "A  {path}")?,
                Change::Removed { path, .. } => writeln!(w, "D  {path}")?,
                Change::Content {
                    path, exec_changed, ..
                } => writeln!(w, "M{} {path}", if *exec_changed { "x" } else { " " })?,
                Change::Exec { path, executable } => {
                    writeln!(w, "X  {path} ({})", if *executable { "+x" } else { "-x" })?
                }
            }
        }
        if self.changes.is_empty() {
            return writeln!(w, "no differences");
        }
        let count = |f: fn(&Change) -> bool| self.changes.iter().filter(|c| f(c)).count();
        writeln!(
            w,
            "{} added, {} removed, {} changed",
            count(|c| matches!(c, Change::Added { .. })),
            count(|c| matches!(c, Change::Removed { .. })),
            count(|c| matches!(c, Change::Content { .. } | Change::Exec { .. })),
        )
    }
}

impl Report for RecoverReport {
    fn exit_code(&self) -> u8 {
        found_problems(!self.problems.is_empty() || !self.manifests_set_aside.is_empty())
    }

    fn human(&self, w: &mut dyn Write) -> io::Result<()> {
        if let Some(a) = &self.set_aside {
            writeln!(w, "set the unusable catalogue aside as {a}")?;
        }
        for d in &self.recovered {
            writeln!(w, "recovered {d}")?;
        }
        for d in &self.rewritten {
            writeln!(w, "rewrote the catalogue rows of {d}")?;
        }
        for d in &self.manifests_written {
            writeln!(w, "wrote the manifest of {d}")?;
        }
        for m in &self.manifests_set_aside {
            writeln!(
                w,
                "set the manifest of {} aside as {}: {} (gc keeps its objects unless --force)",
                m.manifest_digest, m.path, m.detail
            )?;
        }
        for v in &self.views_recorded {
            writeln!(w, "recorded the view {v}")?;
        }
        for p in &self.problems {
            writeln!(w, "not recovered: {}: {}", p.path, p.detail)?;
        }
        writeln!(
            w,
            "{} recorded; {} recovered, {} rewritten, {} written, {} set aside, {} recorded again, {} salvaged{}{}{}",
            counted(self.snapshots, "snapshot", "snapshots"),
            counted(self.recovered.len() as u64, "snapshot", "snapshots"),
            counted(self.rewritten.len() as u64, "snapshot", "snapshots"),
            counted(self.manifests_written.len() as u64, "manifest", "manifests"),
            counted(
                self.manifests_set_aside.len() as u64,
                "manifest",
                "manifests"
            ),
            counted(self.views_recorded.len() as u64, "view", "views"),
            counted(self.events_salvaged, "event", "events"),
            match (self.sources_recorded, self.sources_written) {
                (0, 0) => String::new(),
                (r, w) => format!(
                    "; source records: {r} recorded again, {w} written again"
                ),
            },
            match (self.attestations_recorded, self.attestations_written) {
                (0, 0) => String::new(),
                (r, w) => format!("; attestations: {r} recorded again, {w} written again"),
            },
            if self.problems.is_empty() {
                String::new()
            } else {
                format!(
                    "; {} not recovered",
                    counted(self.problems.len() as u64, "problem", "problems")
                )
            }
        )
    }
}

impl Report for MountsReport {
    fn human(&self, w: &mut dyn Write) -> io::Result<()> {
        writeln!(w, "arm:        {}", self.arm)?;
        writeln!(w, "plugin_dir: {}", self.plugin_dir.unwrap_or("-"))?;
        match &self.manifest_digest {
            Some(d) => writeln!(w, "digest:     {d}")?,
            None => writeln!(w, "digest:     -")?,
        }
        if let Some(d) = &self.gitnexus_runtime.manifest_digest {
            writeln!(w, "runtime:    {d}")?;
        }
        writeln!(w, "mounts:     {}", self.mounts.len())?;
        for m in &self.mounts {
            writeln!(w, "  {} -> {} (read-only)", m.source.display(), m.target)?;
        }
        Ok(())
    }
}

impl Report for PushReport {
    fn human(&self, w: &mut dyn Write) -> io::Result<()> {
        for m in &self.members {
            m.human(w)?;
        }
        let s = &self.stats;
        let p = &self.published;
        writeln!(w, "{}", p.reference)?;
        if let Some(tagged) = &p.tag_reference {
            writeln!(w, "{tagged}")?;
        }
        writeln!(
            w,
            "{}: {} uploaded ({}; {} of {} packs), {} already present; {} in {}",
            p.remote_digest,
            counted(s.blobs_uploaded, "blob", "blobs"),
            counted(s.bytes_uploaded, "byte", "bytes"),
            s.packs_uploaded,
            s.packs_total,
            s.blobs_present,
            counted(p.layers, "layer", "layers"),
            if p.manifests == 1 {
                "1 manifest".to_string()
            } else {
                format!("{} manifests under an index", p.manifests)
            }
        )
    }
}

impl Report for PullReport {
    fn human(&self, w: &mut dyn Write) -> io::Result<()> {
        for m in &self.members {
            writeln!(
                w,
                "{}  pulled first from {}: {} new, {} reused",
                m.manifest_digest,
                m.source,
                counted(m.new_objects, "object", "objects"),
                m.reused_objects
            )?;
        }
        self.ingest.human(w)?;
        let f = &self.pull.fetched;
        writeln!(
            w,
            "pulled from {}: {} fetched ({}); {} fetched, {} skipped",
            self.pull.source,
            counted(f.blobs_fetched, "blob", "blobs"),
            counted(f.bytes_fetched, "byte", "bytes"),
            counted(f.packs_fetched, "pack", "packs"),
            f.packs_skipped
        )
    }
}

impl Report for ExportReport {
    fn human(&self, w: &mut dyn Write) -> io::Result<()> {
        writeln!(w, "{}", self.file)?;
        for m in &self.members {
            writeln!(w, "{m}  member")?;
        }
        writeln!(
            w,
            "{}: {} objects, {} bytes ({}), sha256 {}",
            self.manifest_digest,
            self.objects,
            self.bytes,
            match self.format {
                Format::Tar => "tar",
                Format::TarZstd => "tar+zstd",
            },
            self.sha256
        )
    }
}

impl Report for ImportReport {
    fn human(&self, w: &mut dyn Write) -> io::Result<()> {
        for m in &self.members {
            writeln!(
                w,
                "{}  member {}: {} new, {} reused",
                m.manifest_digest,
                if m.already_present {
                    "already stored"
                } else {
                    "stored"
                },
                counted(m.new_objects, "object", "objects"),
                m.reused_objects
            )?;
        }
        match &self.ingest {
            Some(ingest) => ingest.human(w),
            None => writeln!(
                w,
                "{}: a sound bundle of {} ({}); not imported",
                self.bundle.file,
                self.bundle.manifest_digest,
                counted(self.bundle.objects, "object", "objects")
            ),
        }
    }
}

impl Report for crate::cmd::substituters::Config {
    fn human(&self, w: &mut dyn Write) -> io::Result<()> {
        let file = if self.file_exists { "" } else { " (absent)" };
        writeln!(w, "file          {}{file}", self.file.display())?;
        if self.substituters.is_empty() {
            writeln!(
                w,
                "substituters  none: a snapshot the store lacks is not fetched"
            )?;
        }
        for s in &self.substituters {
            let http = if s.plain_http { " (plain HTTP)" } else { "" };
            writeln!(w, "substituter   {}{http}", s.registry)?;
        }
        if self.trusted_keys.is_empty() {
            writeln!(
                w,
                "trusted keys  none: any snapshot a substituter serves is taken"
            )?;
        }
        for k in &self.trusted_keys {
            writeln!(w, "trusted key   {}", k.display())?;
        }
        writeln!(w, "timeout       {} s", self.timeout)?;
        writeln!(w, "wait          {} s", self.wait)
    }
}

impl Report for ExitCodesReport {
    fn human(&self, w: &mut dyn Write) -> io::Result<()> {
        writeln!(w, "code  kind               meaning")?;
        writeln!(w, "{:>4}  {:<17}  success", crate::error::kind::SUCCESS, "")?;
        for e in &self.exit_codes {
            writeln!(w, "{:>4}  {:<17}  {}", e.code, e.kind, e.meaning)?;
        }
        Ok(())
    }
}

impl Report for RulesReport {
    fn human(&self, w: &mut dyn Write) -> io::Result<()> {
        let p = &self.plugin;
        writeln!(
            w,
            "plugin      {} ({}, canonical manifest schema {}), seen at {}",
            p.name, p.manifest, p.manifest_schema_version, p.sandbox_dir
        )?;
        writeln!(w, "skills      {}", p.required_skills.join(", "))?;
        writeln!(w, "ce arms     {}", self.ce_arms.join(", "))?;
        for b in &self.bounds {
            writeln!(
                w,
                "bound       {} {} ({}; {} lowers it)",
                b.field, b.limit, b.constant, b.flag
            )?;
        }
        writeln!(w, "version     {}", self.exact_version.description)?;
        writeln!(w, "            pattern {}", self.exact_version.pattern)?;
        let g = &self.gitnexus;
        writeln!(
            w,
            "gitnexus    pinned {} by the seed's rules (revisions: {}), seen at {} and {}",
            g.pinned_version,
            g.revisions.join(", "),
            g.sandbox_gitnexus,
            g.sandbox_gitnexus_shared
        )?;
        for r in &self.rules {
            writeln!(
                w,
                "rule        {} ({} {}): {}",
                r.rule, r.code, r.kind, r.message
            )?;
        }
        for r in &self.tree_rules {
            writeln!(
                w,
                "tree rule   {} ({} {}; {}): {}",
                r.rule,
                r.code,
                r.kind,
                r.from.join(", "),
                r.message
            )?;
        }
        for f in &self.flags {
            writeln!(w, "flag        {:<18} {}", f.flag, f.keyword)?;
        }
        Ok(())
    }
}

impl Report for crate::store::ingest::tree::TreeIngestReport {
    /// One line per digest, each named by the harness's field.
    fn human(&self, w: &mut dyn Write) -> io::Result<()> {
        use crate::store::ingest::tree::{StoredCounts, TreeIngestReport};
        let stored = |s: &StoredCounts| {
            format!(
                "{}: {} ({}), {} reused",
                if s.already_present {
                    "already stored"
                } else {
                    "stored"
                },
                counted(s.new_objects, "new object", "new objects"),
                counted(s.bytes_written, "byte", "bytes"),
                s.reused_objects
            )
        };
        // A snapshot's kind, and the name it was given when not the kind's.
        let named = |kind: &str, name: &str| {
            if name == kind {
                kind.to_string()
            } else {
                format!("{kind} {name:?}")
            }
        };
        match self {
            TreeIngestReport::Tree(r) => writeln!(
                w,
                "{}  task_asset_manifest_digest: {}, {}, {}; {}",
                r.manifest_digest,
                named("tree", &r.name),
                counted(r.entries, "entry", "entries"),
                counted(r.total_bytes, "byte", "bytes"),
                stored(&r.stored)
            ),
            TreeIngestReport::Runtime(r) => writeln!(
                w,
                "{}  gitnexus_runtime_manifest_digest: {} ({} rules), {}, {}; {}",
                r.manifest_digest,
                named("gitnexus-runtime", &r.name),
                r.rules,
                counted(r.entries, "entry", "entries"),
                counted(r.total_bytes, "byte", "bytes"),
                stored(&r.stored)
            ),
            TreeIngestReport::Dependencies(r) => {
                writeln!(
                    w,
                    "{}  sandbox_dependency_manifest_digest: {}, {}, {}, {}; {}",
                    r.digest,
                    named("dependencies", &r.name),
                    counted(r.dependencies.len(), "dependency", "dependencies"),
                    counted(r.entries, "entry", "entries"),
                    counted(r.total_bytes, "byte", "bytes"),
                    stored(&r.stored)
                )?;
                writeln!(
                    w,
                    "{}  sandbox_dependency_content_digest",
                    r.dependency_content_digest
                )
            }
            TreeIngestReport::Task(r) => {
                writeln!(
                    w,
                    "{}  task_asset_snapshot_digest: {} at {}, {}; {}",
                    r.digest,
                    named("task", &r.name),
                    r.resolved_sha,
                    counted(r.total_bytes, "byte", "bytes"),
                    stored(&r.stored)
                )?;
                writeln!(w, "{}  task_asset_manifest_digest", r.manifest_digest)?;
                writeln!(
                    w,
                    "{}  sandbox_dependency_manifest_digest",
                    r.dependency_manifest_digest
                )?;
                writeln!(
                    w,
                    "{}  sandbox_dependency_content_digest",
                    r.dependency_content_digest
                )
            }
        }
    }
}

impl Report for crate::store::ingest::environment::EnvironmentReport {
    /// The environment's digest, then one line per member: digest, role, kind.
    fn human(&self, w: &mut dyn Write) -> io::Result<()> {
        writeln!(
            w,
            "{}  environment_digest: environment {:?}, {}; {}",
            self.manifest_digest,
            self.name,
            counted(self.members.len(), "member", "members"),
            if self.stored {
                "stored"
            } else {
                "already stored"
            }
        )?;
        for m in &self.members {
            writeln!(w, "{}  {} ({})", m.digest, m.role, m.kind)?;
        }
        Ok(())
    }
}
