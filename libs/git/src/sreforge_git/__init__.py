"""Git as the SREForge services run it: the operator's config and identity shut out.

Every service that touches a run's repository (the context leak check, the
runner's diff, the deployer's workspace and CI gate) runs git through `run_git`,
so none of them reads `~/.gitconfig`, `/etc/gitconfig` or an inherited `GIT_*`
variable, and output is decoded the same way everywhere. `git` is the checked
form: a non-zero exit raises `GitFailed` naming the command, folder and stderr.
"""

from sreforge_git._run import GitError, GitFailed, GitResult, git, git_env, run_git

__all__ = ["GitError", "GitFailed", "GitResult", "git", "git_env", "run_git"]
