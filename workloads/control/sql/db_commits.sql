-- DBCommits: the database's committed transactions so far (pg_stat_database);
-- two samples give PostgreSQL's commit rate.
SELECT xact_commit FROM pg_stat_database WHERE datname = current_database();
