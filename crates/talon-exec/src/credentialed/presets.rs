//! GoClaw's credential presets (`credential_presets.go`): per CLI, a timeout and the arguments
//! refused even with a grant, so an operator registering `gh` gets sensible defaults without
//! writing regexes. Patterns are matched as in [`super::check_args`].

/// Defaults for one well-known CLI.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Preset {
    /// The binary name (`gh`).
    pub name: &'static str,
    pub timeout_secs: u64,
    /// Regexes over the arguments joined by spaces.
    pub deny_args: &'static [&'static str],
    /// Regexes anchored at the start of each argument (flags whose output can leak credentials).
    pub deny_verbose: &'static [&'static str],
    /// The environment variables the CLI reads its credentials from (a hint for the operator).
    pub env_hint: &'static [&'static str],
    /// What the model is told about the binary.
    pub tips: &'static str,
    /// Where its credentials may go when the operator names no destinations.
    pub destinations: &'static [&'static str],
}

/// The presets: `gh`, `gcloud`, `aws`, `kubectl`, `terraform`, `git`, `psql`.
pub const PRESETS: &[Preset] = &[
    Preset {
        name: "gh",
        timeout_secs: 30,
        deny_args: &[
            r"auth\s+",
            r"ssh-key",
            r"gpg-key",
            r"repo\s+delete",
            r"secret\s+",
        ],
        deny_verbose: &["--verbose", "-v"],
        env_hint: &["GH_TOKEN"],
        tips: "GitHub CLI: gh api, gh repo, gh issue, gh pr, gh run, …",
        destinations: &["github.com", "api.github.com", "uploads.github.com"],
    },
    Preset {
        name: "gcloud",
        timeout_secs: 120,
        deny_args: &[
            r"iam\s+",
            r"auth\s+",
            r"projects\s+delete",
            r"services\s+disable",
            r"kms\s+",
        ],
        deny_verbose: &["--verbosity=debug", "--log-http"],
        env_hint: &["CLOUDSDK_AUTH_ACCESS_TOKEN", "CLOUDSDK_CORE_PROJECT"],
        tips: "Google Cloud CLI: gcloud compute, gcloud storage, gcloud run, …",
        destinations: &["*.googleapis.com"],
    },
    Preset {
        name: "aws",
        timeout_secs: 60,
        deny_args: &[
            r"iam\s+",
            r"organizations\s+",
            r"sts\s+assume",
            r"ec2\s+terminate",
        ],
        deny_verbose: &["--debug"],
        env_hint: &["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION"],
        tips: "AWS CLI: aws s3, aws ec2 describe-*, aws logs, …",
        destinations: &["*.amazonaws.com"],
    },
    Preset {
        name: "kubectl",
        timeout_secs: 60,
        deny_args: &[
            r"delete\s+namespace",
            r"delete\s+node",
            r"drain\s+",
            r"cordon\s+",
        ],
        deny_verbose: &[],
        env_hint: &["KUBECONFIG"],
        tips: "Kubernetes CLI: kubectl get, kubectl describe, kubectl logs, …",
        destinations: &[],
    },
    Preset {
        name: "terraform",
        timeout_secs: 300,
        deny_args: &[r"destroy", r"force-unlock"],
        deny_verbose: &[],
        env_hint: &["TF_TOKEN_app_terraform_io"],
        tips: "Terraform: terraform init, plan, apply, output, …",
        destinations: &["app.terraform.io", "registry.terraform.io"],
    },
    Preset {
        name: "git",
        timeout_secs: 300,
        deny_args: &[
            r"(?i)config\s+(--global|--system)",
            r"(?i)credential-helper",
            r"(?i)\bdaemon\b",
            r"(?i)-c\s+http\.",
            r"(?i)-c\s+credential\.",
            r"(?i)-c\s+core\.sshcommand",
        ],
        deny_verbose: &[],
        env_hint: &["GIT_CONFIG_COUNT", "GIT_CONFIG_KEY_0", "GIT_CONFIG_VALUE_0"],
        tips: "git with stored credentials (for example an http.extraHeader set through GIT_CONFIG_* variables)",
        destinations: &[],
    },
    Preset {
        name: "psql",
        timeout_secs: 60,
        deny_args: &[
            r#"-c\s+["']?(DROP|TRUNCATE)\b"#,
            r"\\!",
            r"\\copy\s+.*FROM\s+PROGRAM",
        ],
        deny_verbose: &[],
        env_hint: &["PGHOST", "PGUSER", "PGPASSWORD", "PGDATABASE"],
        tips: "PostgreSQL client: psql -c 'SELECT …'",
        destinations: &[],
    },
];

/// The preset for `name`, if there is one.
pub fn preset(name: &str) -> Option<&'static Preset> {
    PRESETS.iter().find(|p| p.name == name)
}
