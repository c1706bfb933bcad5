//! A key path that is not a regular file (a FIFO, a directory, a device, a
//! socket, or a symlink to one) is refused at once by every command that
//! reads a key: exit 9 `bad-key`, naming the path and saying that a key must
//! be a regular file, without waiting on the file and without changing the
//! store.

use std::ffi::OsStr;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::json::one_object;
use crate::util::{self, os, TestEnv};

const V: &str = "1.0.0";

/// Far longer than a refusal takes; a blocking open never returns.
const DEADLINE: Duration = Duration::from_secs(10);

/// Every command that reads a key file, with `key` in the key's place.
fn commands(env: &TestEnv, digest: &str, key: &Path) -> Vec<Vec<PathBuf>> {
    let src = env.path("src");
    let results = env.path("results.jsonl");
    let bundle = env.path("b.tar");
    let p = PathBuf::from;
    let k = key.to_path_buf();
    vec![
        vec![p("sign"), p(digest), p("--key"), k.clone()],
        vec![
            p("ingest"),
            src.clone(),
            p("--version"),
            p(V),
            p("--sign-with"),
            k.clone(),
        ],
        vec![
            p("stage"),
            p("--arm"),
            p("ce_workflow"),
            p("--plugin-dir"),
            src,
            p("--plugin-version"),
            p(V),
            p("--sign-with"),
            k.clone(),
        ],
        vec![p("attestations"), p(digest), p("--trusted-key"), k.clone()],
        vec![p("attestations"), p(digest), p("--trusted-keys"), k.clone()],
        vec![p("audit"), results, p("--trusted-key"), k.clone()],
        vec![p("verify"), p("--trusted-key"), k.clone()],
        vec![
            p("pull"),
            p("127.0.0.1:9/cestore/ce:1.0.0"),
            p("--trusted-key"),
            k.clone(),
        ],
        vec![p("import"), bundle.clone(), p("--trusted-key"), k.clone()],
        vec![p("import"), bundle, p("--check"), p("--trusted-keys"), k],
    ]
}

#[test]
fn a_key_that_is_no_regular_file_is_refused_at_once_by_every_command() {
    let env = TestEnv::new().within(DEADLINE);
    let src = env.plugin("src", V);
    let digest = env.ingest_digest(&src, V);
    util::write(
        &env.path("results.jsonl"),
        format!("{{\"arm\": \"ce_workflow\", \"ce_plugin_version\": \"{V}\", \"ce_plugin_manifest_digest\": \"{digest}\"}}\n"),
    );
    env.json([
        os("export"),
        os(&digest),
        os("-o"),
        env.path("b.tar").as_os_str(),
        os("--json"),
    ]);
    // The release changed, so that an ingest or a stage that got past the
    // key would store something new.
    util::write(&src.join("skills/extra/SKILL.md"), "# extra\n");

    let fifo = env.path("fifo");
    util::mkfifo(&fifo);
    let to_fifo = env.path("to-fifo");
    std::os::unix::fs::symlink(&fifo, &to_fifo).expect("symlink");
    let dir = env.path("a-directory");
    std::fs::create_dir(&dir).expect("mkdir");
    let socket = env.path("socket");
    let _listener = UnixListener::bind(&socket).expect("bind a socket");
    let cases: [(&Path, &str); 5] = [
        (&fifo, "a FIFO"),
        (&to_fifo, "a FIFO"),
        (&dir, "a directory"),
        (Path::new("/dev/null"), "a character device"),
        (&socket, "a socket"),
    ];

    let before = util::store_state(&env.store);
    for (key, what) in cases {
        for args in commands(&env, &digest, key) {
            for json in [false, true] {
                let mut args: Vec<&OsStr> = args.iter().map(|a| a.as_os_str()).collect();
                if json {
                    args.push(os("--json"));
                }
                let started = Instant::now();
                let out = env.run(&args);
                let took = started.elapsed();
                let shown = format!("cestore {args:?}");
                let stderr = util::assert_exit(&out, 9);
                let message = if json {
                    let v: serde_json::Value = one_object(&out, &shown);
                    assert_eq!(v["ok"], false, "{v}");
                    assert_eq!(v["error"]["kind"], "bad-key", "{v}");
                    assert_eq!(v["error"]["code"], 9, "{v}");
                    assert_eq!(v["error"]["path"], util::s(key), "{v}");
                    v["error"]["message"]
                        .as_str()
                        .expect("a message")
                        .to_string()
                } else {
                    assert!(out.stdout.is_empty(), "{shown}: {}", util::describe(&out));
                    stderr
                };
                assert!(
                    message.contains(&util::s(key))
                        && message.contains(what)
                        && message.contains("must be a regular file"),
                    "{shown}: {message}"
                );
                assert!(took < DEADLINE, "{shown} took {took:?}");
            }
        }
    }
    // Nothing was stored, signed or pulled.
    assert_eq!(util::store_state(&env.store), before);
    // A FIFO no one ever wrote to is still there, never opened to block.
    assert!(std::fs::symlink_metadata(&fifo).is_ok());
}
