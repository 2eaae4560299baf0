package store

import (
	"strings"
	"testing"
)

// declaredInTest is created by the "every declared bucket" migration.
var declaredInTest = NewBucket[map[string]int]("test-declared")

func TestRegistryRefusesMistakes(t *testing.T) {
	for name, declare := range map[string]func(){
		"bucket declared twice":  func() { NewBucket[int]("test-declared") },
		"bucket name upper case": func() { NewBucket[int]("Bad") },
		"bucket name empty":      func() { NewBucket[int]("") },
		"step provided twice":    func() { Provide(StepClusterAdmissionRelease, func(*Tx) error { return nil }) },
		"step not in the list":   func() { Provide("no such step", func(*Tx) error { return nil }) },
		"step without func":      func() { Provide(StepJoinClaims, nil) },
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
	for i, m := range ms {
		if m.Version != i+1 || m.Name == "" {
			t.Fatalf("migration %d is %+v", i+1, m)
		}
	}
	// The numbers of stores written before the list existed keep their
	// meaning: keyed audit 7, token creators 8.
	if ms[6].Name != "keyed audit chain" || ms[7].Name != "API tokens record their creator" || SchemaVersion() != len(ms) {
		t.Fatalf("migrations %+v", ms)
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
