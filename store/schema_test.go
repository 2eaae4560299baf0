package store

import (
	"strings"
	"testing"
)

// declaredInTest is created by the "every declared bucket" migration.
var declaredInTest = NewBucket[map[string]int]("test-declared")

func TestRegistryRefusesMistakes(t *testing.T) {
	for name, declare := range map[string]func(){
		"bucket declared twice":   func() { NewBucket[int]("test-declared") },
		"bucket name upper case":  func() { NewBucket[int]("Bad") },
		"bucket name empty":       func() { NewBucket[int]("") },
		"migration version taken": func() { AddMigration(Migration{Version: 1, Name: "again", Apply: func(*Tx) error { return nil }}) },
		"migration without func":  func() { AddMigration(Migration{Version: 1000, Name: "empty"}) },
		"migration version zero":  func() { AddMigration(Migration{Name: "zero", Apply: func(*Tx) error { return nil }}) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("no panic")
				}
			}()
			declare()
		})
	}
}

func TestMigrationsRunInVersionOrder(t *testing.T) {
	ms := Migrations()
	for i := 1; i < len(ms); i++ {
		if ms[i-1].Version >= ms[i].Version {
			t.Fatalf("migrations out of order: %d then %d", ms[i-1].Version, ms[i].Version)
		}
	}
	if got := DeclaredBuckets(); !strings.Contains(strings.Join(got, ","), "test-declared") {
		t.Fatalf("DeclaredBuckets() = %v", got)
	}
}

func TestTypedBucket(t *testing.T) {
	db, _ := openTemp(t, testKey(t))
	if err := db.Update(func(tx *Tx) error {
		for k, n := range map[string]int{"b": 2, "a": 1} {
			if err := declaredInTest.Put(tx, k, map[string]int{"n": n}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	err := db.View(func(tx *Tx) error {
		v, found, err := declaredInTest.Get(tx, "b")
		if err != nil || !found || v["n"] != 2 {
			t.Errorf("Get(b) = %v, %v, %v", v, found, err)
		}
		if _, found, _ := declaredInTest.Get(tx, "zz"); found {
			t.Error("Get(zz) found")
		}
		var keys []string
		_ = declaredInTest.ForEach(tx, func(k string, v map[string]int) error { keys = append(keys, k); return nil })
		if strings.Join(keys, ",") != "a,b" {
			t.Errorf("ForEach keys = %v", keys)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
