//! A real Slurm run (issue 17): a one-node cluster on localhost (munged on a private socket,
//! slurmctld and slurmd on free ports, all under a scratch directory), the CPU sweep of a
//! small profile submitted as a job array (`sbatch --array`, each task a shard by its
//! SLURM_ARRAY_* variables into its own work directory), then `merge`: the merged corpus holds
//! exactly the cells and rows of a one-process run, and each cell names its array task.

mod common;

use std::collections::BTreeSet;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::vnni;
use vnni_corpus::collection::read_corpus_rows;

const TOOLS: [&str; 5] = ["munged", "slurmctld", "slurmd", "sbatch", "sinfo"];

/// A tool on PATH or in /usr/sbin (daemons live there and root's PATH may lack it).
fn tool(name: &str) -> Option<PathBuf> {
    let path = std::env::var("PATH").unwrap_or_default();
    let found = path.split(':').chain(["/usr/sbin", "/usr/bin"]).map(|d| Path::new(d).join(name)).find(|p| p.is_file());
    found
}

/// The daemons of the scratch cluster, stopped when dropped.
struct Cluster {
    dir: PathBuf,
    daemons: Vec<Child>,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for d in self.daemons.iter_mut().rev() {
            let _ = d.kill();
            let _ = d.wait();
        }
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn spawn(dir: &Path, name: &str, args: &[&str]) -> Child {
    let log = std::fs::File::create(dir.join(format!("{name}.out"))).unwrap();
    Command::new(tool(name).unwrap())
        .args(args)
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .stdin(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("starting {name}: {e}"))
}

impl Cluster {
    fn start(dir: &Path) -> Cluster {
        std::fs::create_dir_all(dir.join("spool")).unwrap();
        std::fs::create_dir_all(dir.join("state")).unwrap();
        let key = dir.join("munge.key");
        // A fresh key, readable by its owner only (munged refuses anything looser).
        let mut random = vec![0u8; 1024];
        std::fs::File::open("/dev/urandom").unwrap().read_exact(&mut random).unwrap();
        std::fs::write(&key, &random).unwrap();
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
        let mut cluster = Cluster { dir: dir.to_path_buf(), daemons: Vec::new() };
        let d = |f: &str| dir.join(f).display().to_string();
        let socket = d("munge.sock");
        let munged_args = [
            "-F".to_string(),
            "--force".into(),
            format!("--socket={socket}"),
            format!("--key-file={}", d("munge.key")),
            format!("--pid-file={}", d("munged.pid")),
            format!("--log-file={}", d("munged.log")),
            format!("--seed-file={}", d("munge.seed")),
        ];
        let refs: Vec<&str> = munged_args.iter().map(String::as_str).collect();
        cluster.daemons.push(spawn(dir, "munged", &refs));
        wait_for(|| Path::new(&socket).exists(), "munged's socket", dir);

        let word = |cmd: &str, arg: &str| {
            String::from_utf8(Command::new(cmd).arg(arg).output().unwrap().stdout).unwrap().trim().to_string()
        };
        let (host, user) = (word("hostname", "-s"), word("id", "-un"));
        let conf = format!(
            "ClusterName=vnni\nSlurmctldHost={host}\nSlurmUser={user}\nSlurmdUser={user}\n\
             AuthType=auth/munge\nAuthInfo=socket={socket}\nCredType=cred/munge\n\
             SlurmctldPort={}\nSlurmdPort={}\nStateSaveLocation={}\nSlurmdSpoolDir={}\n\
             SlurmctldPidFile={}\nSlurmdPidFile={}\nSlurmctldLogFile={}\nSlurmdLogFile={}\n\
             ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\nSelectType=select/cons_tres\n\
             SelectTypeParameters=CR_CPU\nSchedulerType=sched/builtin\nJobAcctGatherType=jobacct_gather/none\n\
             MpiDefault=none\nReturnToService=2\nNodeName={host} CPUs={} State=UNKNOWN\n\
             PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n",
            free_port(),
            free_port(),
            d("state"),
            d("spool"),
            d("slurmctld.pid"),
            d("slurmd.pid"),
            d("slurmctld.log"),
            d("slurmd.log"),
            std::thread::available_parallelism().map_or(1, |n| n.get()),
        );
        std::fs::write(dir.join("slurm.conf"), conf).unwrap();
        let conf = d("slurm.conf");
        cluster.daemons.push(spawn(dir, "slurmctld", &["-D", "-f", &conf]));
        cluster.daemons.push(spawn(dir, "slurmd", &["-D", "-f", &conf]));
        wait_for(|| cluster.client("sinfo", &["-h", "-o", "%t"]).1.trim() == "idle", "an idle node", dir);
        cluster
    }

    /// A Slurm client command against this cluster: (success, stdout, stderr).
    fn client(&self, name: &str, args: &[&str]) -> (bool, String, String) {
        let out = Command::new(tool(name).unwrap())
            .args(args)
            .env("SLURM_CONF", self.dir.join("slurm.conf"))
            .output()
            .unwrap();
        (out.status.success(), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
    }
}

/// Poll `ready` for up to 60 s; the failure names what never came and the logs.
fn wait_for(mut ready: impl FnMut() -> bool, what: &str, dir: &Path) {
    let start = Instant::now();
    while !ready() {
        if start.elapsed() > Duration::from_secs(60) {
            let logs: Vec<String> =
                ["munged.out", "munged.log", "slurmctld.out", "slurmctld.log", "slurmd.out", "slurmd.log"]
                    .iter()
                    .map(|f| format!("== {f}\n{}", std::fs::read_to_string(dir.join(f)).unwrap_or_default()))
                    .collect();
            panic!("no {what} after 60 s:\n{}", logs.join("\n"));
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// (mode, format, N x K, M, candidate) of every row: what a corpus measured, not how fast.
fn row_keys(corpus: &Path) -> BTreeSet<String> {
    read_corpus_rows(corpus)
        .unwrap()
        .iter()
        .map(|r| format!("{} {:?} {}x{} m{} {}", r.mode, r.source_format, r.n, r.k, r.m, r.candidate))
        .collect()
}

#[test]
fn a_slurm_job_array_collects_the_shards_that_merge_into_one_run() {
    if let Some(missing) = TOOLS.iter().find(|t| tool(t).is_none()) {
        vnni_tests::missing_tool(missing, "apt-get install slurm-wlm munge (scripts/test.sh does, as root)");
        return;
    }
    let dir = std::env::temp_dir().join(format!("vnni-slurm-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let cluster = Cluster::start(&dir);

    let inventory = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/tiny-inventory");
    let inv = inventory.display().to_string();
    let sweep_args = |out: &str| -> Vec<String> {
        ["sweep", "--backend", "cpu", "--profile", "tiny", "--inventory", &inv, "--threads", "1", "--out", out]
            .map(String::from)
            .to_vec()
    };
    // The batch script: the binary and its arguments, each single-quoted for sh.
    let quoted = |args: Vec<String>| {
        std::iter::once(env!("CARGO_BIN_EXE_vnni-dispatch").to_string())
            .chain(args)
            .map(|a| format!("'{}'", a.replace('\'', "'\\''")))
            .collect::<Vec<_>>()
            .join(" ")
    };
    // Each array task is a shard (from SLURM_ARRAY_TASK_ID / _COUNT) into its own directory.
    let task_out = dir.join("task-%a.out").display().to_string();
    let script = format!("{}-\"$SLURM_ARRAY_TASK_ID\"", quoted(sweep_args(&format!("{}/work", dir.display()))));
    let (ok, o, e) =
        cluster.client("sbatch", &["--wait", "--array=0-2", "-c", "1", "-o", &task_out, "--wrap", &script]);
    let outputs: Vec<String> =
        (0..3).map(|i| std::fs::read_to_string(dir.join(format!("task-{i}.out"))).unwrap_or_default()).collect();
    assert!(ok, "sbatch failed: {o}{e}\n{}", outputs.join("\n"));
    for (i, out) in outputs.iter().enumerate() {
        assert!(out.contains("cells in this shard"), "task {i}: {out}");
    }
    let shards: Vec<String> = (0..3).map(|i| format!("{}/work-{i}", dir.display())).collect();
    let merged = dir.join("merged");
    let mut args = vec!["merge", "--out", merged.to_str().unwrap()];
    args.extend(shards.iter().map(String::as_str));
    let (ok, o, e) = vnni(&args);
    assert!(ok && o.contains("corpus sealed"), "{o}{e}");

    let one = dir.join("one");
    let args = sweep_args(one.to_str().unwrap());
    let (ok, o, e) = vnni(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(ok && o.contains("corpus sealed"), "{o}{e}");
    assert_eq!(row_keys(&merged.join("corpus")), row_keys(&one.join("corpus")));
    assert_eq!(std::fs::read(merged.join("plan.json")).unwrap(), std::fs::read(one.join("plan.json")).unwrap());
    // Every cell's provenance names the array task that measured it: all three took part.
    let cells = std::fs::read_to_string(merged.join("corpus/cells.csv")).unwrap();
    for shard in ["0/3", "1/3", "2/3"] {
        assert!(cells.lines().any(|l| l.contains(&format!(",{shard},"))), "no cell of shard {shard}:\n{cells}");
    }
    drop(cluster);
    let _ = std::fs::remove_dir_all(&dir);
}
