//! Who and what made a catalogue event: the host, the user, this build.

/// The host name, for ingest events.
pub fn host_name() -> String {
    rustix::system::uname()
        .nodename()
        .to_string_lossy()
        .into_owned()
}

/// The user name, for ingest events: `$USER`, `$LOGNAME`, the name
/// `/etc/passwd` gives the uid, else the uid.
pub fn user_name() -> String {
    let uid = rustix::process::getuid().as_raw();
    std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .ok()
        .filter(|u| !u.is_empty())
        .or_else(|| passwd_name(uid))
        .unwrap_or_else(|| format!("uid {uid}"))
}

fn passwd_name(uid: u32) -> Option<String> {
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|line| {
        let mut fields = line.split(':');
        let name = fields.next()?;
        let id = fields.nth(1)?;
        (id.parse::<u32>().ok()? == uid).then(|| name.to_string())
    })
}

/// This build's version, for ingest events.
pub const TOOL_VERSION: &str = concat!("cestore ", env!("CARGO_PKG_VERSION"));
