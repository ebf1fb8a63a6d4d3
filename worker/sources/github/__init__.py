"""GitHub issues as a task source, one module per idea.

- `source`: `GitHubSource`, the `TaskSource` over labelled issues (list, claim, report);
- `selection`: which issues are tasks, their ids and priorities (pure);
- `claims`: claim comments and labels, so two machines never take the same issue;
- `client`: the REST client (PyGithub for reads, tenacity for retries, ETags kept in SQLite);
- `http`: the HTTP layer under it: tokens, errors, rate limits;
- `report`: the comment bodies a task's claim and result leave on its issue;
- `delivery`: pushing the branch, opening the pull request, posting the result;
- `pending`: results that could not be posted, kept to send again on the next listing;
- `settings`: `[github]` in worker.toml.

Nothing is imported here: the configuration imports `settings` alone, without the rest.
"""
