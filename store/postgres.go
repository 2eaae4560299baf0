package store

import "errors"

func openPostgres(dsn string) (backend, error) {
	return nil, errors.New("store: PostgreSQL backend not built yet")
}

func (db *DB) start() {}
